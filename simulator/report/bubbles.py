"""The pipeline bubble, split: the schedule's own idle time with balanced stages, and the rest (stage imbalance).

``schedule_bubble`` replays the step's schedule (workloads/schedules/base.py) outside the engine with every stage
equally fast: each task takes the mean duration of its kind (F, B, W, F&B, ...) over all stages, and
activations arrive the moment they are sent. Its idle fraction is what the schedule costs by itself
(1F1B: (p - 1) / (m + p - 1)); ``bubble_fraction - schedule_bubble`` is the idle time that comes from the
stages differing (an embedding or LM-head stage, uneven layers, a straggler) and from PP transfers.

NOTE: the replay's cost does not grow with the micro-batches: past its warm-up each stage's end and busy time
grow by the same amount per period once its state repeats (simulator/fast/periodic.py), so two short replays give
them at any m; the full replay runs only where no short replay repeats, or none is shorter.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import NamedTuple

from simulator.fast.periodic import Fields, Records, candidates, extrapolate, locked, shift_s
from workloads.schedules.base import Flow, Phase, Schedule, ScheduleShape, Task


def phase_means(spans: Mapping[Phase, tuple[float, int]]) -> dict[Phase, float]:
    """Mean task duration of each phase from (summed duration, count) per phase."""
    return {phase: total / count for phase, (total, count) in spans.items() if count}


def schedule_bubble(schedule: Schedule, mean_s: Mapping[Phase, float]) -> float:
    """Mean idle fraction of the stages when ``schedule`` runs with balanced stages, each task of a phase
    taking ``mean_s[phase]`` (the engine's mean over all stages; phase_means)."""
    fields = None
    for m_a, q, shift in candidates(schedule):
        first, records = _replay(schedule.resized(m_a), mean_s)
        lam_s = shift_s(records, shift)
        if first and locked(records, shift, lam_s, 0.0):
            second, _ = _replay(schedule.resized(m_a + q), mean_s)
            if second:
                fields = extrapolate(first, second, m_a, m_a + q, schedule.micro_batches)
            break
    if fields is None:
        fields, _ = _replay(schedule, mean_s)
    if not fields:
        return 0.0  # a schedule that cannot be replayed this way: no split
    end = fields[("s", "end")]
    if end <= 0:
        return 0.0  # an empty step
    idle = sum(1 - fields[("s", "busy", stage)] / end for stage in range(schedule.stages)) / schedule.stages
    return max(0.0, idle)  # >= 0: a stage busy for the whole replay gives -2e-16 in floating point


# Round-off of a difference of two means of up to 10^4 stage fractions (each within a few ulps, 2.2e-16):
# a difference smaller than this in magnitude is no imbalance at all.
ROUND_OFF = 1e-12


def imbalance_idle(bubble: float, balanced: float) -> float:
    """``bubble - balanced``, the idle time stage imbalance adds to the schedule's own, exactly 0 within round-off
    (a negative value beyond it is kept: the simulated stages idled less than the balanced replay)."""
    difference = bubble - balanced
    return 0.0 if abs(difference) < ROUND_OFF else difference


class _Plan(NamedTuple):
    """A schedule's replay as indices: per stage, its tasks and each task's input and output flow numbers."""

    tasks: tuple[tuple[Task, ...], ...]
    inputs: tuple[tuple[tuple[int, ...], ...], ...]
    outputs: tuple[tuple[tuple[int, ...], ...], ...]
    flows: int


@lru_cache(maxsize=256)
def _plan(shape: ScheduleShape) -> _Plan:
    """The replay plan of the schedule ``shape`` builds, once per shape: points that differ only in their task
    times (another model, cluster or NIC with the same PP, micro-batches and schedule) share it."""
    schedule = shape.build()
    numbers: dict[Flow, int] = {}
    tasks, inputs, outputs = [], [], []
    for stage in range(schedule.stages):
        order = tuple(schedule.order(stage))
        tasks.append(order)
        inputs.append(
            tuple(tuple(numbers.setdefault(f, len(numbers)) for f in schedule.inputs(stage, t)) for t in order)
        )
        outputs.append(
            tuple(tuple(numbers.setdefault(f, len(numbers)) for f in schedule.outputs(stage, t)) for t in order)
        )
    return _Plan(tuple(tasks), tuple(inputs), tuple(outputs), len(numbers))


def _replay(schedule: Schedule, mean_s: Mapping[Phase, float]) -> tuple[Fields, Records]:
    """Each stage's busy time and the end of the balanced replay (empty if it cannot run to the end), and
    each stage's (task, begin_s, end_s) records.

    NOTE: event-driven for speed: a stage runs its tasks until one waits for a flow, and is woken when that flow
    is sent. A task's times depend only on its stage's previous task and its inputs' arrival, so any order that
    respects those gives the same numbers as running every ready task in passes over the stages."""
    plan = _plan(schedule.shape)
    stages = len(plan.tasks)
    ready: list[float | None] = [None] * plan.flows  # arrival time of each activation / gradient
    waiting: dict[int, list[int]] = {}  # flow -> stages blocked on it
    done, clock, busy = [0] * stages, [0.0] * stages, [0.0] * stages
    records: list[list[tuple[Task, float, float]]] = [[] for _ in range(stages)]
    runnable = list(range(stages - 1, -1, -1))  # a stack: stage 0 first
    duration = {phase: mean_s.get(phase, 0.0) for phase in Phase}
    while runnable:
        stage = runnable.pop()
        tasks, inputs, outputs = plan.tasks[stage], plan.inputs[stage], plan.outputs[stage]
        i, now, spent, log = done[stage], clock[stage], busy[stage], records[stage]
        while i < len(tasks):
            start = now  # the latest of the stage's clock and the inputs' arrivals
            for flow in inputs[i]:
                arrival = ready[flow]
                if arrival is None:
                    waiting.setdefault(flow, []).append(stage)
                    break
                start = max(start, arrival)
            else:
                task = tasks[i]
                now = start + duration[task.direction]
                log.append((task, start, now))
                spent += duration[task.direction]
                for flow in outputs[i]:
                    ready[flow] = now
                    if flow in waiting:
                        runnable.extend(waiting.pop(flow))
                i += 1
                continue
            break
        done[stage], clock[stage], busy[stage] = i, now, spent
    if any(count < len(tasks) for count, tasks in zip(done, plan.tasks)):
        return {}, records
    fields: Fields = {("s", "end"): max(clock)}
    fields.update({("s", "busy", stage): b for stage, b in enumerate(busy)})
    return fields, records
