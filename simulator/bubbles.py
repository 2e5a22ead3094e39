"""The pipeline bubble, split: the schedule's own idle time with balanced stages, and the rest (stage imbalance).

``schedule_bubble`` replays the step's schedule (workloads/schedules.py) outside the engine with every stage
equally fast: each task takes the mean duration of its kind (F, B, W, F&B, ...) over all stages, and
activations arrive the moment they are sent. Its idle fraction is what the schedule costs by itself
(1F1B: (p - 1) / (m + p - 1)); ``bubble_fraction - schedule_bubble`` is the idle time that comes from the
stages differing (an embedding or LM-head stage, uneven layers, a straggler) and from PP transfers.

NOTE: the replay's cost does not grow with the micro-batches: past its warm-up each stage's end and busy time
grow by the same amount per period once its state repeats (simulator/periodic.py), so two short replays give
them at any m; the full replay runs only where no short replay repeats, or none is shorter.
"""

from __future__ import annotations

from collections.abc import Mapping

from simulator.periodic import Fields, Records, candidates, extrapolate, locked, resized, shift_s
from workloads.schedules import Flow, Phase, Schedule, Task


def phase_means(spans: Mapping[Phase, tuple[float, int]]) -> dict[Phase, float]:
    """Mean task duration of each phase from (summed duration, count) per phase."""
    return {phase: total / count for phase, (total, count) in spans.items() if count}


def schedule_bubble(schedule: Schedule, mean_s: Mapping[Phase, float]) -> float:
    """Mean idle fraction of the stages when ``schedule`` runs with balanced stages, each task of a phase
    taking ``mean_s[phase]`` (the engine's mean over all stages; phase_means)."""
    fields = None
    for m_a, q, shift in candidates(schedule):
        first, records = _replay(resized(schedule, m_a), mean_s)
        lam_s = shift_s(records, shift)
        if first and locked(records, shift, lam_s, 0.0):
            second, _ = _replay(resized(schedule, m_a + q), mean_s)
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
    return sum(1 - fields[("s", "busy", stage)] / end for stage in range(schedule.stages)) / schedule.stages


def _replay(schedule: Schedule, mean_s: Mapping[Phase, float]) -> tuple[Fields, Records]:
    """Each stage's busy time and the end of the balanced replay (empty if it cannot run to the end), and
    each stage's (task, begin_s, end_s) records."""
    orders = [schedule.order(stage) for stage in range(schedule.stages)]
    ready: dict[Flow, float] = {}  # arrival time of each activation / gradient
    done, clock, busy = [0] * len(orders), [0.0] * len(orders), [0.0] * len(orders)
    records: list[list[tuple[Task, float, float]]] = [[] for _ in orders]
    moved = True
    while moved:  # each pass runs, on every stage, the tasks whose inputs have arrived
        moved = False
        for stage, order in enumerate(orders):
            while done[stage] < len(order):
                task = order[done[stage]]
                needs = schedule.inputs(stage, task)
                if any(flow not in ready for flow in needs):
                    break
                start = max([clock[stage], *(ready[flow] for flow in needs)])
                clock[stage] = start + mean_s.get(task.direction, 0.0)
                records[stage].append((task, start, clock[stage]))
                busy[stage] += mean_s.get(task.direction, 0.0)
                for flow in schedule.outputs(stage, task):
                    ready[flow] = clock[stage]
                done[stage] += 1
                moved = True
    if any(count < len(order) for count, order in zip(done, orders)):
        return {}, records
    fields: Fields = {("s", "end"): max(clock)}
    fields.update({("s", "busy", stage): b for stage, b in enumerate(busy)})
    return fields, records
