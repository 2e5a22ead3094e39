"""Fewer cyclic-garbage collections while a step runs: the same results, less CPU (issue #16).

A step allocates an event (and often a generator frame or a callback closure) per simpy step; nearly all die young
and are freed by reference counting, yet CPython's collector runs a generation-0 pass every 700 net container
allocations and a full one every 100 of those, when enough has been promoted (``gc.set_threshold`` default
(700, 10, 10), https://docs.python.org/3/library/gc.html). On the Qwen3-235B bench point that is ~300 passes and
2-3 full collections a step, each full one traversing every object alive (the imported libraries, the caches of
earlier steps): 0.2-0.3 CPU s of a 1.5 s step, more the more earlier steps left alive.

``fewer_collections`` runs its body with the objects alive at its start frozen (``gc.freeze``: left out of the
collections until ``gc.unfreeze`` at its end puts them back in the oldest generation) and generation 0 collected
every STEP_THRESHOLDS[0] allocations: ~0.06 CPU s a step. A collection frees only unreachable cycles, and nothing
the simulator computes has a finalizer or reads object addresses, so when collections run changes no result
(tests/differential/test_gc_budget.py runs steps both ways); the garbage of cycles waits longer (~30 MiB more on that point).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# Allocations between generation-0 collections during a step (CPython's 700), and the generation-1 and -2 counts
# kept at CPython's. Measured on the Qwen3-235B bench point (2-core development machine): 10,000 with the freeze
# takes the collector from ~0.2-0.3 s to ~0.06 s of the step; higher counts gain little and keep more garbage.
STEP_THRESHOLDS = (10_000, 10, 10)
ENABLED = True  # False: CPython's collections during steps too (a speed switch: simulator/fast/__init__.py)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the body with what is alive now frozen and each generation's threshold at least STEP_THRESHOLDS'.

    Nested uses keep the outermost's; automatic collection switched off (threshold 0), thresholds set higher by the
    caller and a caller's own freeze (a server that froze before forking) are left alone."""
    before = gc.get_threshold()
    during = tuple(max(now, step) for now, step in zip(before, STEP_THRESHOLDS))
    if not ENABLED or before[0] == 0 or during == before:
        yield
        return
    freeze = not gc.get_freeze_count()
    if freeze:
        gc.freeze()
    gc.set_threshold(*during)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if freeze:
            gc.unfreeze()
