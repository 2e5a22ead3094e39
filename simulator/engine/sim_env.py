"""The engine's simpy environment: one place that makes them (the engine, the task timers, the bounds).

A leaner ``simpy.Environment`` (the clock as an attribute, events built without their ``__init__`` calls, an
inlined run loop) took 3-4% off op-level steps and none off memoized or extrapolated ones (issue 38's ablation):
not worth its 90 lines, so steps run on simpy's own.
"""

from __future__ import annotations

import simpy


def environment() -> simpy.Environment:
    """A new environment for a simulation."""
    return simpy.Environment()
