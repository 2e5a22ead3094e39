"""The balanced replay (simulator/report/bubbles.py): a hand-computed 1F1B timeline, and the event-driven replay
against the plain one it replaced (every ready task run in passes over the stages), on every schedule."""

from __future__ import annotations

import random

import pytest

from simulator.report.bubbles import _replay
from workloads.schedules.base import BACKWARD, FORWARD, Phase, Task
from workloads.schedules.registry import make_schedule


def _replay_in_passes(schedule, mean_s):
    """The reference: pass over the stages, run each stage's tasks while their inputs have arrived."""
    orders = [schedule.order(stage) for stage in range(schedule.stages)]
    ready, done = {}, [0] * len(orders)
    clock, busy = [0.0] * len(orders), [0.0] * len(orders)
    records = [[] for _ in orders]
    moved = True
    while moved:
        moved = False
        for stage, order in enumerate(orders):
            while done[stage] < len(order):
                task = order[done[stage]]
                needs = schedule.inputs(stage, task)
                if any(flow not in ready for flow in needs):
                    break
                start = max([clock[stage], *(ready[flow] for flow in needs)])
                clock[stage] = start + mean_s.get(task.direction, 0.0)
                busy[stage] += mean_s.get(task.direction, 0.0)
                records[stage].append((task, start, clock[stage]))
                for flow in schedule.outputs(stage, task):
                    ready[flow] = clock[stage]
                done[stage] += 1
                moved = True
    if any(count < len(order) for count, order in zip(done, orders)):
        return {}, records
    return {("s", "end"): max(clock), **{("s", "busy", s): b for s, b in enumerate(busy)}}, records


def test_two_stage_1f1b_timeline() -> None:
    """PP 2, 2 micro-batches, F 1 s, B 2 s: stage 1 runs F0 [1, 2], B0 [2, 4], F1 [4, 5], B1 [5, 7]; stage 0
    runs F0 [0, 1], F1 [1, 2], then waits for B0's gradient: B0 [4, 6], B1 [7, 9]. Busy 6 s of 9 on each."""
    fields, records = _replay(make_schedule("1f1b", 2, 2), {FORWARD: 1.0, BACKWARD: 2.0})
    f, b = lambda mb: Task(FORWARD, mb, 0), lambda mb: Task(BACKWARD, mb, 0)
    assert records[0] == [(f(0), 0.0, 1.0), (f(1), 1.0, 2.0), (b(0), 4.0, 6.0), (b(1), 7.0, 9.0)]
    assert records[1] == [(f(0), 1.0, 2.0), (b(0), 2.0, 4.0), (f(1), 4.0, 5.0), (b(1), 5.0, 7.0)]
    assert fields == {("s", "end"): 9.0, ("s", "busy", 0): 6.0, ("s", "busy", 1): 6.0}


@pytest.mark.parametrize(
    "name, stages, micro_batches, chunks, overlap",
    [
        ("1f1b", 1, 3, 1, {}),
        ("1f1b", 15, 60, 1, {}),
        ("zb1p", 4, 12, 1, {}),
        ("interleaved", 4, 8, 2, {}),
        ("interleaved", 4, 16, 3, {"ep_overlap": True}),
        ("interleaved", 4, 16, 2, {"ep_overlap": True, "delay_wgrad": True}),
        ("dualpipe", 4, 20, 1, {}),
        ("dualpipev", 8, 64, 1, {}),
    ],
)
def test_event_driven_replay_equals_passes(name: str, stages: int, micro_batches: int, chunks: int, overlap) -> None:
    """Bit for bit: the same records (task, begin, end) per stage and the same end and busy times."""
    schedule = make_schedule(name, stages, micro_batches, chunks, **overlap)
    rng = random.Random(stages * 1000 + micro_batches)
    for _ in range(3):
        means = {phase: rng.uniform(0.1, 3.0) for phase in Phase}
        assert _replay(schedule, means) == _replay_in_passes(schedule, means)
