"""Megatron-Core's per-chunk gradient reduction under the interleaved schedule (simulator/engine/grad_sync.py): which
backward starts each chunk's reduce-scatter, derived by hand from the schedule's task order, and a step whose
earlier chunk reduces beside the cool-down while only the last one is exposed."""

from __future__ import annotations

import pytest

from simulator.engine.engine import Engine
from simulator.engine.grad_sync import chunk_syncs, per_chunk_sync
from simulator.engine.probes import Probe, TransferLog
from tests.toys import SCENARIO_CALIBRATION
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.schedules.pipeline_tasks import BACKWARD, Task
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset


class GatherWait(Probe):
    """Each stage's wait for the DP parameter gather before its first task."""

    def __init__(self) -> None:
        self.wait_s: dict[int, float] = {}

    def on_inputs(self, place, stage: int, task: Task, pp_wait_s: float, dp_wait_s: float) -> None:
        if place.replica == 0 and place.rank == 0:
            self.wait_s[stage] = self.wait_s.get(stage, 0.0) + dp_wait_s


def _workload(schedule: str = "interleaved", dp: int = 2) -> StepWorkload:
    """Mixtral 8x7B, PP 2 with 2 chunks a stage (4 blocks of 8 layers), 4 micro-batches, DP ``dp``."""
    chunks = 2 if schedule == "interleaved" else 1
    layout = layout_preset("megascale-moe").with_(pp=2, schedule=schedule, virtual_stages=chunks, micro_batch=1)
    return StepWorkload(model_preset("mixtral-8x7b"), layout, 16 * dp, 8, 4 * dp, 4096)


def test_turns_by_hand() -> None:
    """Both stages run their backwards as B(0,1) B(1,1) B(0,0) B(1,0) B(2,1) B(3,1) B(2,0) B(3,0) (micro-batch,
    chunk). Chunk 1's last backward is the 6th (index 5), chunk 0's the 8th (index 7). Stage 0 (PP rank 0) reduces
    each right after its last backward; stage 1 one backward later: chunk 1 after B(2,0), chunk 0 past the last
    backward, so at the end ("Launch any remaining grad reductions")."""
    workload = _workload()
    backwards = [task for task in workload.stage_order(0) if task.direction == BACKWARD]
    assert [(t.micro_batch, t.chunk) for t in backwards] == [
        (0, 1),
        (1, 1),
        (0, 0),
        (1, 0),
        (2, 1),
        (3, 1),
        (2, 0),
        (3, 0),
    ]
    stage0, stage1 = chunk_syncs(workload, 0), chunk_syncs(workload, 1)
    assert stage0.after == {Task(BACKWARD, 3, 1): (1,), Task(BACKWARD, 3, 0): (0,)} and stage0.at_end == ()
    assert stage1.after == {Task(BACKWARD, 2, 0): (1,)} and stage1.at_end == (0,)


def test_only_the_interleaved_schedule_reduces_chunk_by_chunk() -> None:
    assert per_chunk_sync(_workload())
    assert not per_chunk_sync(_workload("1f1b"))
    layout = _workload().layout.with_(dp_overlap=False)
    assert not per_chunk_sync(StepWorkload(model_preset("mixtral-8x7b"), layout, 32, 8, 8, 4096))


def test_the_earlier_chunk_reduces_beside_the_cool_down() -> None:
    """DP 2: stage 0 reduces chunk 1 after B(3,1), while B(2,0) and B(3,0) still run, and chunk 0 after the last
    backward. Its exposed DP time is the first forward's wait for the parameter gather plus the time from the end
    of its last backward to the end of chunk 0's reduction, which is the last to land; chunk 1's landed before."""
    workload = _workload()
    log, gather = TransferLog(), GatherWait()
    result = Engine(workload, cluster_preset("h800", 32), SCENARIO_CALIBRATION, probes=[log, gather]).run()
    grads = [t for t in log.transfers if t.kind == "dp-grads" and t.src == 0]
    assert [t.key for t in grads] == [(1,), (0,)]
    tasks = {task: (begin, end) for task, begin, end in result.stages[0].tasks}
    assert grads[0].start_s == pytest.approx(tasks[Task(BACKWARD, 3, 1)][1], abs=1e-12)
    last_end = result.stages[0].tasks[-1][2]
    assert grads[1].start_s == pytest.approx(last_end, abs=1e-12)
    assert grads[0].end_s < grads[1].end_s
    exposed = result.stages[0].dp_exposed_s
    assert exposed == pytest.approx(gather.wait_s[0] + grads[1].end_s - last_end, rel=1e-9)
