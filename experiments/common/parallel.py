"""Independent pieces of work in local processes, results in the order given (``validate``, ``reproduce all``)."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def default_jobs() -> int:
    """The CPUs this process may run on (its affinity where the platform tells it, else the CPU count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no sched_getaffinity
        return os.cpu_count() or 1


def _context():
    """fork while this process has one thread (no start-up: the workers inherit the imports); a fork beside
    other threads can copy a lock that one of them holds, so forkserver (or the platform's default) then."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else None)


def in_order(work: Callable[[Item], Result], items: Iterable[Item], jobs: int) -> Iterator[Result]:
    """``work`` over ``items`` in up to ``jobs`` processes (in this one for 1 job or 1 item), yielded in the
    items' order whatever finishes first. The processes start now (before a progress bar's thread can make
    fork unsafe); ``work`` must be a module-level function (it is pickled)."""
    items = list(items)
    jobs = min(jobs, len(items))
    if jobs <= 1:
        return map(work, items)
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=_context())
    futures = [pool.submit(work, item) for item in items]
    return _results(pool, futures)


def _results(pool: ProcessPoolExecutor, futures: list) -> Iterator:
    """The futures' results in order. The pool shuts down (waiting for the workers, so their CPU time counts as
    this process's children's) before the last result is yielded: a consumer that stops at the count (zip, next)
    leaves this generator suspended, and closing the pool at interpreter exit fails on closed descriptors."""
    try:
        for i, future in enumerate(futures):
            result = future.result()
            if i == len(futures) - 1:
                pool.shutdown(wait=True)
            yield result
    finally:  # an error or an early close: stop the workers (a second shutdown is a no-op)
        pool.shutdown(wait=True, cancel_futures=True)
