"""Engine observers: probes subscribe to a step's events and never patch the engine.

A probe gets six events, each a no-op unless overridden: the run starts (the engine is built), a
pipeline task's inputs are in (it starts), a task ends, a PP send or DP bucket lands, a network assigns new
max-min rates, and the run ends. Probes only read what they are given; the step's timing never depends on them. Pass them to
``Engine(..., probes=...)``, or subscribe them to every engine built inside a block with
``observing`` (the bench counts all the steps of ``moesim reproduce all`` that way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

if TYPE_CHECKING:
    from simulator.engine.result import EngineResult
    from simulator.streams.network import FluidNetwork
    from simulator.streams.tasks import TaskTiming
    from workloads.schedules.base import Task


class Transfer(NamedTuple):
    """One PP send or DP bucket the engine moved (over the NIC, or NVLink inside a node)."""

    kind: str  # "pp" | "dp-params" | "dp-grads"
    src: Any  # the sending place (a stage in the folded engine)
    dst: Any  # the receiving place; a DP bucket's src and dst are its stage
    start_s: float
    end_s: float
    nbytes: float
    key: tuple  # PP: (direction, micro_batch, chunk, destination place); DP: (bucket,)


class Probe:
    """Base class of engine observers: override the events you need."""

    # Whether the probe needs the step run in full (every task, transfer, rate); one that reads on_run only
    # sets False, and then may be told of a step the steady-state shortcut extrapolated (simulator/fast/steady.py).
    needs_full_run: ClassVar[bool] = True
    # Whether on_task reads ``timing.intervals`` (op-level tasks then record them; simulator/engine/timer.py)
    reads_intervals: ClassVar[bool] = True

    def on_start(self, engine: Any) -> None:
        """The engine (simulator/engine/engine.py: workload, cluster, faults, placement) is built and about to run."""

    def on_inputs(self, place: Any, stage: int, task: Task, pp_wait_s: float, dp_wait_s: float) -> None:
        """``task``'s inputs are in and it starts now, after waiting ``pp_wait_s`` for PP arrivals and ``dp_wait_s``
        for the DP parameter gather."""

    def on_task(self, place: Any, stage: int, task: Task, begin_s: float, end_s: float, timing: TaskTiming) -> None:
        """``task`` ran on ``place`` (of ``stage``) from begin_s to end_s; ``timing.intervals`` count from begin_s."""

    def on_transfer(self, transfer: Transfer) -> None:
        """A PP send or DP bucket has landed."""

    def on_link_rates(self, network: FluidNetwork) -> None:
        """One of the step's networks changed its flows' rates (at ``network.env.now``); read, never write."""

    def on_run(self, result: EngineResult) -> None:
        """The step is done."""


_AMBIENT: ContextVar[tuple[Probe, ...]] = ContextVar("moesim_probes", default=())


@contextmanager
def observing(*probes: Probe) -> Iterator[None]:
    """Subscribe ``probes`` to every engine built inside the block (nested blocks add up)."""
    token = _AMBIENT.set(_AMBIENT.get() + probes)
    try:
        yield
    finally:
        _AMBIENT.reset(token)


@contextmanager
def unobserved() -> Iterator[None]:
    """No enclosing ``observing`` block's probes for the engines built inside (the steady-state shortcut's
    shorter runs: its probes are told of the step, not of them)."""
    token = _AMBIENT.set(())
    try:
        yield
    finally:
        _AMBIENT.reset(token)


def subscribed(probes: Iterable[Probe]) -> tuple[Probe, ...]:
    """``probes`` and those of the enclosing ``observing`` blocks."""
    return (*probes, *_AMBIENT.get())


def _watches_rates(probe: Probe) -> bool:
    return type(probe).on_link_rates is not Probe.on_link_rates


def reads_tasks(probes: Iterable[Probe]) -> bool:
    """Whether a probe is told of each task and may read its op intervals."""
    return any(type(probe).on_task is not Probe.on_task and probe.reads_intervals for probe in probes)


def start_probes(probes: tuple[Probe, ...], engine: Any, networks: Iterable[FluidNetwork]) -> None:
    """Subscribe the probes' rate observers to each distinct network, then announce the run."""
    # NOTE: only probes that override on_link_rates are called on every rate update.
    observers: list[Callable[[FluidNetwork], None]] = [probe.on_link_rates for probe in probes if _watches_rates(probe)]
    if observers:
        for network in dict.fromkeys(networks):
            network.observers.extend(observers)
    for probe in probes:
        probe.on_start(engine)


class TransferLog(Probe):
    """Every PP send and DP bucket of a step, in the order they landed."""

    def __init__(self) -> None:
        self.transfers: list[Transfer] = []

    def on_transfer(self, transfer: Transfer) -> None:
        self.transfers.append(transfer)
