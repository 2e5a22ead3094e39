"""The pipeline bubble, split: the schedule's own idle time with balanced stages, and the rest (stage imbalance).

``schedule_bubble`` replays the step's schedule (workloads/schedules.py) outside the engine with every stage
equally fast: each task takes the mean duration of its kind (F, B, W, F&B, ...) over all stages, and
activations arrive the moment they are sent. Its idle fraction is what the schedule costs by itself
(1F1B: (p - 1) / (m + p - 1)); ``bubble_fraction - schedule_bubble`` is the idle time that comes from the
stages differing (an embedding or LM-head stage, uneven layers, a straggler) and from PP transfers.
"""

from __future__ import annotations

from collections import defaultdict

from workloads.schedules import Flow, Schedule


def schedule_bubble(schedule: Schedule, tasks: list[list[tuple]]) -> float:
    """Mean idle fraction of the stages when ``schedule`` runs with balanced stages (``tasks``: per stage, the
    engine's (task, begin_s, end_s) records, whose durations give each kind's mean)."""
    spans: dict[object, list[float]] = defaultdict(list)
    for records in tasks:
        for task, begin, end in records:
            spans[task.direction].append(end - begin)
    mean = {kind: sum(values) / len(values) for kind, values in spans.items()}
    orders = [schedule.order(stage) for stage in range(schedule.stages)]
    ready: dict[Flow, float] = {}  # arrival time of each activation / gradient
    done, clock, busy = [0] * len(orders), [0.0] * len(orders), [0.0] * len(orders)
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
                clock[stage] = start + mean.get(task.direction, 0.0)
                busy[stage] += mean.get(task.direction, 0.0)
                for flow in schedule.outputs(stage, task):
                    ready[flow] = clock[stage]
                done[stage] += 1
                moved = True
    end = max(clock)
    if end <= 0 or any(count < len(order) for count, order in zip(done, orders)):
        return 0.0  # an empty step, or a schedule that cannot be replayed this way: no split
    return sum(1 - b / end for b in busy) / len(orders)
