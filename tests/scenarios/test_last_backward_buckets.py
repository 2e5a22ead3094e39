"""Megatron-Core's plain 1F1B with --overlap-grad-reduce (simulator/engine/grad_sync.py): the first stage starts each
gradient bucket as its last backward fills it, the other stages all their buckets after their cool-down. The
timeline by hand on a two-stage step, with the weight gather before it (grad_sync.ParamGather): a chunk's first forward
held until its last bucket and that bucket's layer, and the gather started at the step's start or, not aligned, at the
first forward's inputs."""

from __future__ import annotations

import pytest

from simulator.engine.engine import Engine
from simulator.engine.grad_sync import buckets_during_last_backward
from simulator.engine.probes import Probe, TransferLog
from tests.toys import SCENARIO_CALIBRATION
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.schedules.pipeline_tasks import BACKWARD, FORWARD, Task
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset


def _workload(dp: int = 2, **changes) -> StepWorkload:
    """Mixtral 8x7B, PP 2 (16 layers a stage: 16 buckets), 4 micro-batches, DP ``dp``, 1F1B."""
    layout = layout_preset("megascale-moe").with_(**{"pp": 2, "schedule": "1f1b", "micro_batch": 1, **changes})
    return StepWorkload(model_preset("mixtral-8x7b"), layout, 16 * dp, 8, 4 * dp, 4096)


def test_which_task_starts_the_buckets() -> None:
    """Stage 0's last backward, B(3, 0); none on stage 1 (it reduces in the bubble after its cool-down), without
    DP, without DP overlap, under ZeRO-3 (per layer in the tasks) or another schedule."""
    assert buckets_during_last_backward(_workload(), 0) == Task(BACKWARD, 3, 0)
    assert buckets_during_last_backward(_workload(), 1) is None
    assert buckets_during_last_backward(_workload(dp=1), 0) is None
    assert buckets_during_last_backward(_workload(dp_overlap=False), 0) is None
    assert buckets_during_last_backward(_workload(zero_stage=3), 0) is None
    assert buckets_during_last_backward(_workload(schedule="zb1p"), 0) is None


def test_the_first_stage_reduces_beside_its_last_backward() -> None:
    """Stage 0's B(3, 0) runs from b to e; B(2, 0), the same ops memoized, took d = e - b as well. Bucket k (0 to 15)
    starts at b + (k + 1) d / 16: the first a sixteenth into the backward, the last as it ends. Stage 1's 16 buckets
    all start as its last task ends. Stage 0's exposed DP time after its backward is its last bucket's end - e."""
    workload = _workload()
    log, first = TransferLog(), FirstForward()
    result = Engine(workload, cluster_preset("h800", 32), SCENARIO_CALIBRATION, probes=[log, first]).run()
    tasks = {task: (begin, end) for task, begin, end in result.stages[0].tasks}
    begin, end = tasks[Task(BACKWARD, 3, 0)]
    previous = tasks[Task(BACKWARD, 2, 0)]
    assert previous[1] - previous[0] == pytest.approx(end - begin, rel=1e-12)
    grads = [t for t in log.transfers if t.kind == "dp-grads" and t.src == 0]
    assert [t.key for t in grads] == [(k,) for k in range(16)]
    for k, transfer in enumerate(grads):
        assert transfer.start_s == pytest.approx(begin + (k + 1) * (end - begin) / 16, abs=1e-12)
    assert grads[0].start_s < end  # during the backward, where it used to wait for its end
    last_end_1 = result.stages[1].tasks[-1][2]
    assert all(
        t.start_s == pytest.approx(last_end_1, abs=1e-12) for t in log.transfers if t.kind == "dp-grads" and t.src == 1
    )
    # stage 0's first forward waits for the first parameter bucket (its start); it is then held until its last
    # bucket has landed and that bucket's layer (a sixteenth of its compute) has run, and the second task starts
    # there; then the step's tail waits for the gradient buckets
    gather_wait_s = result.stages[0].tasks[0][1]
    params = [t.end_s for t in log.transfers if t.kind == "dp-params" and t.src == 0]
    assert gather_wait_s == pytest.approx(min(params), abs=1e-12)
    forward_end_s = result.stages[0].tasks[0][2]
    held_s = max(params) + first.compute_s / 16 - forward_end_s
    assert held_s > 0  # the gather of 16 buckets outlasts the first forward
    assert result.stages[0].tasks[1][1] == pytest.approx(forward_end_s + held_s, abs=1e-12)
    exposed_s = gather_wait_s + held_s + max(t.end_s for t in grads) - end
    assert result.stages[0].dp_exposed_s == pytest.approx(exposed_s, rel=1e-9)


class FirstForward(Probe):
    """The compute time of stage 0's first forward."""

    compute_s = 0.0

    def on_task(self, place, stage, task, begin_s, end_s, timing) -> None:
        if stage == 0 and task == Task(FORWARD, 0, 0):
            self.compute_s = timing.compute_busy_s


def test_without_aligned_gathers_a_stage_gathers_from_its_first_inputs() -> None:
    """Without --align-param-gather (Megatron-LM's 1F1B) stage 1's first forward pre-hook starts its gather: its first
    parameter bucket leaves as F(0)'s activation lands, and F(0) starts as that bucket lands. Aligned, the bucket
    leaves at the step's start."""
    for aligned, leaves_at in ((True, lambda landed_s: 0.0), (False, lambda landed_s: landed_s)):
        log = TransferLog()
        workload = _workload(align_param_gather=aligned)
        result = Engine(workload, cluster_preset("h800", 32), SCENARIO_CALIBRATION, probes=[log]).run()
        landed_s = next(t.end_s for t in log.transfers if t.kind == "pp" and t.dst == 1)
        params = [t for t in log.transfers if t.kind == "dp-params" and t.src == 1]
        assert params[0].start_s == pytest.approx(leaves_at(landed_s), abs=1e-12)
        assert result.stages[1].tasks[0][1] == pytest.approx(max(landed_s, params[0].end_s), abs=1e-12)
