"""A run's additive fields as time-ordered increments: what the steady-state shortcut sums over one period.

Once a run's state repeats (simulator/periodic.lock_window), the run one period longer is this run with one
period inserted, so each additive field of the longer run exceeds this one's by what this run accumulates
over one period (simulator/fast/steady.py). The ledger makes that sum possible: each task's increments of its
stage's busy, PP-wait, DP-wait and compute-busy time, model FLOPs, exposed communication per group and its
phase's span and count, in the order tasks end (the instant each is attributed to), and at each end of a
stage-0 task a mark: how many entries precede it and the bytes sent over every link by then (bytes are
counted where flows start, memoized or op level, so a snapshot catches every path that moves them). The sum
between two marks is then every field's increment between those instants. Kept only when the shortcut asks
for it (``Engine(..., ledger=True)``): a run without one pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from simulator.fast.periodic import BYTES, COUNT, FLOPS, TIME, Fields
from simulator.streams.tasks import TaskTiming
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


@dataclass
class Ledger:
    """A run's increments in the order they were made, and stage 0's marks between them."""

    bytes_sent: Callable[[], dict]  # the placement's bytes per link so far
    entries: list[Entry] = field(default_factory=list)
    marks: dict[Task, Mark] = field(default_factory=dict)

    def note(self, entry: Entry) -> None:
        """Record a task's increments as it ends (with a mark if it is stage 0's)."""
        self.entries.append(entry)
        if entry.stage == 0:
            self.marks[entry.task] = Mark(len(self.entries), self.bytes_sent())

    def between(self, first: Task, last: Task) -> Fields:
        """Every field's increment from stage 0's task ``first`` ending to ``last`` ending (both marked), keyed
        as simulator/steady.fields_of keys them (step, pipeline-end and end times aside)."""
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
