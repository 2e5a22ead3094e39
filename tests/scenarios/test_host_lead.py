"""The host's lead across pipeline tasks (simulator/engine/host_lead.py) in a whole step: Megatron-Core's alltoall
dispatcher, dropless, syncs the host on the tokens per expert in each MoE layer, so every task of this step has a
host sync; after each the host is free once it has issued what follows the task's last sync
(TaskTiming.host_free_s), and the next task is issued from then on."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import Engine
from simulator.engine.timer import TIMINGS
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.inputs.yaml_files import load_model
from workloads.specs.layouts import layout_preset


def _step(memoize: bool = True):
    """Mixtral-8x7B on 8 H100, EP 8 with Megatron-Core's alltoall dispatcher, no pipeline: 4 micro-batches."""
    layout = layout_preset("megatron-lm").with_(token_dispatcher="alltoall", intra_size=1, ffn="ep", ep=8, pp=1)
    workload = StepWorkload(load_model("mixtral-8x7b"), layout, 8, 8, 8 * 4, 1024)
    engine = Engine(workload, cluster_preset("h100", 8), DEFAULT_CALIBRATION, memoize=memoize)
    return workload, engine, engine.run()


def test_each_task_is_issued_from_when_the_host_was_free_after_the_last_sync() -> None:
    """Replayed by hand from the tasks' timings alone: task i begins when task i - 1 ends (no pipeline) and its ops
    before its first sync are issued lead_i = min(begin_i - host_end_(i-1), their issue time) early, where
    host_end_(i-1) = begin_(i-1) + host_free_s of task i - 1 timed at its own lead; the first task has no lead. Every
    task's span is its timing at that lead, and the host is ahead of every task but the first."""
    TIMINGS.clear()
    workload, engine, result = _step()
    assert workload.host_runs_ahead
    tasks = result.stages[0].tasks
    host_end = None
    leads = []
    for task, begin_s, end_s in tasks:
        key = workload.task_key(0, task)
        costs = engine._costs.get(key)
        assert costs.has_host_sync
        lead = 0.0 if host_end is None else min(begin_s - host_end, costs.host_ahead_s)
        timing = engine._memo.task_timing(key, 0, 0.0, lead)
        assert end_s - begin_s == pytest.approx(timing.duration_s, rel=1e-12, abs=1e-15), task
        assert 0.0 < timing.host_free_s < timing.duration_s  # free before the GPU has run the ops after the sync
        host_end = begin_s + timing.host_free_s
        leads.append(lead)
    assert leads[0] == 0.0 and all(lead > 0.0 for lead in leads[1:])
    first_forward, later_forward = tasks[0], tasks[2]
    assert later_forward[2] - later_forward[1] < first_forward[2] - first_forward[1]


def test_the_lead_after_a_sync_is_the_same_memoized_and_at_op_level() -> None:
    """The memoized step (each task timed alone at its lead) equals every op run in the step's environment."""
    TIMINGS.clear()
    memo = _step(memoize=True)[2]
    ops = _step(memoize=False)[2]
    assert memo.step_time_s == pytest.approx(ops.step_time_s, rel=1e-9)
    for (task, begin_s, end_s), (twin, twin_begin_s, twin_end_s) in zip(memo.stages[0].tasks, ops.stages[0].tasks):
        assert task == twin
        assert (begin_s, end_s) == pytest.approx((twin_begin_s, twin_end_s), rel=1e-9)
