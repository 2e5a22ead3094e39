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
``fewer_full_collections`` does the same for a whole job between its steps, with fewer full collections only.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# Allocations between generation-0 collections during a step (CPython's 700), and the generation-1 and -2 counts
# kept at CPython's. Measured on the Qwen3-235B bench point (2-core development machine): 10,000 with the freeze
# takes the collector from ~0.2-0.3 s to ~0.06 s of the step; higher counts gain little and keep more garbage.
STEP_THRESHOLDS = (10_000, 10, 10)
ENABLED = True  # False: CPython's collections during steps and jobs too (a speed switch: simulator/fast/__init__.py)
# A job of many steps (a search, a sweep, the validation corpus, the reproductions) keeps alive what its earlier steps
# made (task timings, op lists, reports), and each full collection between its steps traverses all of it: `moesim
# search` of mixtral-8x7b on 128 H100s (1 job) made 36 of them, 5.3 of its 41.3 CPU s. Through a job a full
# collection waits for 100 generation-1 passes instead of CPython's 10; its steps keep STEP_THRESHOLDS.
JOB_THRESHOLDS = (700, 10, 100)


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


@contextmanager
def fewer_full_collections() -> Iterator[None]:
    """Run the body (a job of many steps) with each generation's threshold at least JOB_THRESHOLDS', restored after;
    automatic collection switched off (threshold 0) is left off."""
    before = gc.get_threshold()
    if not ENABLED or before[0] == 0:
        yield
        return
    gc.set_threshold(*(max(now, job) for now, job in zip(before, JOB_THRESHOLDS)))
    try:
        yield
    finally:
        gc.set_threshold(*before)
