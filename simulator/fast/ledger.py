"""A run's additive fields as time-ordered increments: what the steady-state shortcut sums over one period.

Once a run's state repeats (simulator/fast/periodic.lock_window), the run one period longer is this run with one
period inserted, so each additive field of the longer run exceeds this one's by what this run accumulates
over one period (simulator/fast/steady.py). The ledger makes that sum possible: each task's increments of its
stage's busy, PP-wait, DP-wait and compute-busy time, model FLOPs, exposed communication per group and its
phase's span and count, in the order tasks end (the instant each is attributed to), and at each end of a
stage-0 task a mark: how many entries precede it and the bytes sent over every link by then (bytes are
counted where flows start, memoized or op level, so a snapshot catches every path that moves them); and at every
stage's task ends the bytes over that stage's own links, for a line along one run's steady periods
(simulator/fast/run_line.py). The sum between two marks is then every field's increment between those instants. It is a probe of the engine
(simulator/engine/probes.py) on the folded placement, which the shortcut passes to its runs; it also keeps the
longest PP send (the lock window's reach).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from simulator.engine.probes import Probe, Transfer
from simulator.fast.periodic import BYTES, COUNT, FLOPS, TIME, Fields
from simulator.streams.alone import TaskTiming
from workloads.schedules.base import Task


class Entry(NamedTuple):
    """One task's increments: its stage, the task, its span and timing, and the PP and DP waits before it."""

    stage: int
    task: Task
    begin_s: float
    end_s: float
    timing: TaskTiming
    pp_wait_s: float
    dp_wait_s: float


class Mark(NamedTuple):
    """At the end of a stage-0 task: the entries made by then (its own included) and the bytes per link."""

    entries: int
    bytes_sent: dict


class Ledger(Probe):
    """A run's increments in the order they were made, stage 0's marks between them, and its longest PP send."""

    reads_intervals = False  # reads spans and sums only: op-level tasks need not record their ops

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.marks: dict[Task, Mark] = {}
        # per stage, the bytes sent over its own links (a folded link names its stage second) at each of its tasks'
        # ends, in their order (simulator/fast/run_line.py): one tuple of their bytes per task, in stage_links' order
        self.stage_bytes: dict[int, list[tuple[float, ...]]] = {}
        self._counters: dict[int, tuple] = {}  # per stage, (a network's bytes_sent, one of the stage's links on it)
        self.longest_send_s = 0.0  # from the sender's end (one NIC latency before it leaves) to its landing
        self._bytes_sent: Callable[[], dict] = dict
        self._latency_s = 0.0
        self._waits: dict[Any, tuple[float, float]] = {}

    def on_start(self, engine: Any) -> None:
        self._bytes_sent, self._latency_s = engine.placement.bytes_sent, engine.cluster.nic_latency_s
        own: dict[int, list] = {}
        for network in getattr(engine.placement, "networks", ()):
            for link in network.bytes_sent:
                stage = stage_of(link)
                if stage is not None:
                    own.setdefault(stage, []).append((network.bytes_sent, link))
        self._counters = {stage: tuple(pairs) for stage, pairs in own.items()}

    def stage_links(self, stage: int) -> tuple:
        """``stage``'s own links, in the order of its ``stage_bytes`` tuples."""
        return tuple(link for _, link in self._counters.get(stage, ()))

    def on_inputs(self, place: Any, stage: int, task: Task, pp_wait_s: float, dp_wait_s: float) -> None:
        if getattr(place, "replica", 0) == 0:
            self._waits[place] = (pp_wait_s, dp_wait_s)

    def on_task(self, place: Any, stage: int, task: Task, begin_s: float, end_s: float, timing: TaskTiming) -> None:
        """Record a task's increments as it ends (with a mark if it is stage 0's). Only the stages' representatives
        (replica 0, which EngineResult.stages holds) count: where a degraded NIC folds the replicas into two classes
        (simulator/engine/replica_classes.py), the healthy class's tasks are not in the result's stage logs."""
        if getattr(place, "replica", 0) != 0:
            return
        pp_wait_s, dp_wait_s = self._waits.pop(place)
        self.entries.append(Entry(stage, task, begin_s, end_s, timing, pp_wait_s, dp_wait_s))
        counters = self._counters.get(stage, ())
        self.stage_bytes.setdefault(stage, []).append(tuple(sent[link] for sent, link in counters))
        if stage == 0:
            self.marks[task] = Mark(len(self.entries), self._bytes_sent())

    def on_transfer(self, transfer: Transfer) -> None:
        if transfer.kind == "pp":
            send_s = transfer.end_s - transfer.start_s + self._latency_s
            self.longest_send_s = max(self.longest_send_s, send_s)

    def between(self, first: Task, last: Task) -> Fields:
        """Every field's increment from stage 0's task ``first`` ending to ``last`` ending (both marked), keyed
        as simulator/fast/steady.fields_of keys them (step, pipeline-end and end times aside)."""
        start, stop = self.marks[first], self.marks[last]
        out: Fields = {}

        def add(name: tuple, value: float) -> None:
            out[name] = out.get(name, 0.0) + value

        for stage, task, begin_s, end_s, timing, pp_wait_s, dp_wait_s in self.entries[start.entries : stop.entries]:
            add((TIME, stage, "busy_s"), end_s - begin_s)
            add((TIME, stage, "pp_wait_s"), pp_wait_s)
            add((TIME, stage, "dp_exposed_s"), dp_wait_s)
            add((TIME, stage, "compute_busy_s"), timing.compute_busy_s)
            add((FLOPS, stage), timing.model_flops)
            for group, seconds in timing.exposed_comm_s.items():
                add((TIME, stage, "exposed", group), seconds)
            add((TIME, "phase", task.direction), end_s - begin_s)
            add((COUNT, task.direction), 1)
        for link, nbytes in stop.bytes_sent.items():
            out[(BYTES, link)] = nbytes - start.bytes_sent.get(link, 0.0)
        return out


def stage_of(link: object) -> int | None:
    """The stage whose link ``link`` is, where it names one (a folded link names its stage second), else None."""
    if isinstance(link, tuple) and len(link) > 1 and isinstance(link[1], int):
        return link[1]
    return None
