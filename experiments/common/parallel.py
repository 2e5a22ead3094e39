"""Independent pieces of work in parallel, results in the order given: ``in_order`` in local processes
(``validate``, ``reproduce all``); ``Workers`` in this process, local processes or a dask cluster behind one
interface (``search``, ``sweep``), sending work in batches to processes that live as long as the job."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import Any, TypeVar

from simulator.engine.gc_budget import fewer_full_collections
from topologies.errors import ConfigError

Item = TypeVar("Item")
Result = TypeVar("Result")

CONNECT_TIMEOUT_S = 3  # dask retries a refused connection until then
_ADDRESS = re.compile(r"^(?:(tcp|tls|ws|wss|ucx|inproc)://)?\[?[\w.\-:]+\]?:\d{1,5}$")
# A map's batches shrink as it goes (guided self-scheduling, Polychronopoulos & Kuck 1987): each holds the items
# left over GUIDED_SHARE x the workers, so the first are long and few (one task a point cost the client's process,
# which holds a LocalCluster's scheduler, 1.1 CPU-s over search-1000's 1,000 bounds: about 1 ms a task) and the
# last, which decide when the map ends while other workers idle, are short. Never below 1/LEAST_SHARE of the items
# per worker, so a map of many cheap items (memory checks: 0.5 ms each) stays a few dozen tasks.
GUIDED_SHARE = 2
LEAST_SHARE = 32


def batch_sizes(count: int, slots: int, most: int = 0) -> list[int]:
    """The sizes of a map's batches of ``count`` items on ``slots`` workers, in order (at most ``most`` each)."""
    least = max(1, -(-count // (slots * LEAST_SHARE)))
    sizes: list[int] = []
    left = count
    while left:
        size = min(left, max(least, -(-left // (slots * GUIDED_SHARE))))
        size = min(size, most) if most else size
        sizes.append(size)
        left -= size
    return sizes


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


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>: the signal a process gets when the thread that made it exits
WATCH_PERIOD_S = 0.5  # how often a worker without the parent-death signal looks for its parent (no process left 2 s)


def _worker_start(parent: int) -> None:
    """A pool worker's first act: die with ``parent`` (on Linux the kernel's parent-death signal; elsewhere a
    thread that looks for it), and leave Ctrl-C to the parent, which says it in one line and stops the pool."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if not _alive(parent):  # it died before the signal was asked for
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass  # no prctl in this libc: watch instead
    threading.Thread(target=_watch, args=(parent,), daemon=True, name="moesim-parent-watch").start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user (the pid was reused): our parent is gone
        return False
    return True


def _watch(parent: int) -> None:
    """End this worker once ``parent`` is gone (platforms without the parent-death signal)."""
    while _alive(parent):
        time.sleep(WATCH_PERIOD_S)
    os._exit(1)


def _pool(jobs: int) -> ProcessPoolExecutor:
    """Local worker processes that die with this one and ignore Ctrl-C (this process stops them)."""
    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=_context(), initializer=_worker_start, initargs=(os.getpid(),)
    )


def _stop(pool: ProcessPoolExecutor, now: bool) -> None:
    """Shut ``pool`` down, waiting for its workers; ``now`` (Ctrl-C, an error) kills the running ones first
    rather than waiting for their tasks to finish."""
    if now:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.kill()
    pool.shutdown(wait=True, cancel_futures=True)


def in_order(work: Callable[[Item], Result], items: Iterable[Item], jobs: int) -> Iterator[Result]:
    """``work`` over ``items`` in up to ``jobs`` processes (in this one for 1 job or 1 item), yielded in the
    items' order whatever finishes first. The processes start now (before a progress bar's thread can make
    fork unsafe); ``work`` must be a module-level function (it is pickled)."""
    items = list(items)
    jobs = min(jobs, len(items))
    if jobs <= 1:
        return map(work, items)
    pool = _pool(jobs)
    futures = [pool.submit(_one, work, item) for item in items]
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
    except BaseException:  # Ctrl-C or an error: kill the workers rather than wait for their tasks
        _stop(pool, now=True)
        raise
    finally:  # an early close: stop the workers (a second shutdown is a no-op)
        pool.shutdown(wait=True, cancel_futures=True)


def connect(scheduler: str | object):
    """A dask Client for ``scheduler`` (an address or a Client) and whether we own it; ConfigError within
    CONNECT_TIMEOUT_S seconds for a malformed or unreachable address."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise ConfigError("scheduler", "needs dask.distributed: pip install 'moesim[dist]'") from None
    if isinstance(scheduler, Client):
        return scheduler, False
    if not isinstance(scheduler, str) or not _ADDRESS.match(scheduler):
        raise ConfigError("scheduler", f"expected an address such as tcp://host:8786, got {str(scheduler)[:80]!r}")
    try:
        return Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s"), True
    except Exception as error:  # noqa: BLE001 - any failure to connect (refused, timeout, a non-dask peer)
        first = (str(error).strip().splitlines() or [type(error).__name__])[0][:160]
        raise ConfigError("scheduler", f"cannot reach {scheduler} within {CONNECT_TIMEOUT_S} s: {first}") from None


def _batch(work: Callable[..., Result], items: list, shared: tuple) -> list[Result]:
    """One task of a map: ``work(item, *shared)`` for each item of a batch (module level: it is pickled), with the
    job's fewer full garbage collections (simulator/engine/gc_budget.py) on the worker."""
    with fewer_full_collections():
        return [work(item, *shared) for item in items]


def _one(work: Callable[[Item], Result], item: Item) -> Result:
    """``in_order``'s task: ``work(item)`` with the job's fewer full garbage collections, as ``_batch``."""
    with fewer_full_collections():
        return work(item)


class Workers:
    """Where a job's independent pieces run, one interface for every backend: this process (``jobs`` 1), ``jobs``
    local processes, or the workers of a dask cluster (``scheduler``: an address or a Client). ``imap`` sends items
    in batches (one task per batch, not per item); ``submit`` sends one call, for work whose next items depend on
    results so far. Both give concurrent.futures futures, so callers wait on every backend alike. The processes
    live as long as this object, so their imports and caches serve every phase of a search (candidates, bounds,
    simulations); ``share`` puts a value on them once (dask: scattered to every worker) for the tasks to take."""

    def __init__(self, jobs: int = 1, scheduler: str | object | None = None) -> None:
        self.client, self._owned = connect(scheduler) if scheduler is not None else (None, False)
        self.scheduler = scheduler
        self._executor: Executor | None = None
        if self.client is not None:
            self._executor = self.client.get_executor(pure=False)
            self.slots = max(1, sum(self.client.nthreads().values()))
        elif jobs > 1:
            self._executor = _pool(jobs)
            self.slots = jobs
        else:
            self.slots = 1

    @property
    def parallel(self) -> bool:
        return self._executor is not None

    def where(self) -> str:
        if self.client is not None:
            return f"on {self.scheduler if isinstance(self.scheduler, str) else 'a dask cluster'}"
        return f"on {self.slots} process{'es' if self.slots > 1 else ''}"

    def share(self, value: Any) -> Any:
        """``value`` for tasks to take as an argument: on a dask cluster a future of it, sent to every worker once,
        not with each task; elsewhere the value (a local pool pickles it with each batch: few, small)."""
        if self.client is None:
            return value
        # In a list of one: scatter sends a list's or a dict's items each as a future of its own (a dict's keyed by
        # its own keys, which a later scatter of the same keys would race with the release of these).
        (future,) = self.client.scatter([value], broadcast=True, hash=False)
        return future

    def submit(self, work: Callable[..., Result], *args: Any) -> Future:
        """``work(*args)`` on a worker; in this process (computed now) without one."""
        if self._executor is not None:
            return self._executor.submit(work, *args)
        future: Future = Future()
        try:
            future.set_result(work(*args))
        except Exception as error:  # noqa: BLE001 - raised again by future.result(), as a pool's would be
            future.set_exception(error)
        return future

    def imap(self, work: Callable[..., Result], items: list, *shared: Any, most: int = 0) -> Iterator[Result]:
        """``work(item, *shared)`` for each item, yielded in the items' order, in batches that shrink as they go
        (``batch_sizes``; at most ``most`` items each where given: rows reach a table as batches finish); in this
        process one by one. ``work`` must be a module-level function."""
        if self._executor is None:
            yield from (work(item, *shared) for item in items)
            return
        futures, start = [], 0
        for size in batch_sizes(len(items), self.slots, most):
            futures.append(self._executor.submit(_batch, work, items[start : start + size], shared))
            start += size
        try:
            for future in futures:
                yield from future.result()
        finally:  # an error or an early close: drop what has not run
            for future in futures:
                future.cancel()

    def map(self, work: Callable[..., Result], items: list, *shared: Any) -> list[Result]:
        """``imap`` as a list."""
        return list(self.imap(work, items, *shared))

    def close(self, now: bool = False) -> None:
        """Stop local processes (waiting, so their CPU time counts as this process's children's; ``now``: killing
        the running ones first); a dask client this object opened is closed, one it was given is left open, its
        pending tasks cancelled."""
        if isinstance(self._executor, ProcessPoolExecutor):
            _stop(self._executor, now)
        elif self._executor is not None:
            self._executor.shutdown(wait=False)
        self._executor = None
        if self._owned:
            self.client.close()

    def __enter__(self) -> Workers:  # noqa: PYI034 - Self needs Python 3.11; this class is not subclassed
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.close(now=kind is not None)
