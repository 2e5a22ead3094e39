"""The root of a monotone function by bisection: the one search for "the value at which a case comes out exact"
(experiments/paper/calibrate.py's residual, experiments/validation/host_bound.py's per-kernel host cost)."""

from __future__ import annotations

from collections.abc import Callable


def bisect_root(rising: Callable[[float], float], low: float, high: float, tolerance: float) -> float:
    """The root of ``rising`` (increasing: non-positive at ``low``, positive at ``high``) to ``tolerance``; the
    middle of the last interval."""
    while high - low > tolerance:
        middle = (low + high) / 2
        if rising(middle) > 0:
            high = middle
        else:
            low = middle
    return (low + high) / 2
