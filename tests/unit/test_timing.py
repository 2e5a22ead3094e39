"""simulator.engine.timing: one task or one op timed alone, the public view the figures use."""

from __future__ import annotations

import pytest

from experiments.paper.fig16 import pair_speedup
from simulator.engine.timing import comm_alone_s, time_op_s, time_task
from tests.toys import TOY_CALIBRATION, TOY_GPU, toy_calibration
from topologies.cluster import ClusterSpec
from workloads.graph.step import StepWorkload
from workloads.ops import ALL_TO_ALL, COLLECTIVE, COMM, Op
from workloads.schedules.base import FORWARD, Task
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

# 8 GPUs, all-to-all: 50 MB egress at efficiency 0.5 is 100 MB on the wire, 1 ms at 100 GB/s; one step of 1 us
# (every peer at once, no fixed cost in the toy calibration); the host launches its one kernel in 10 us first.
A2A = Op("a2a", COLLECTIVE, COMM, collective=ALL_TO_ALL, group="ep", group_size=8, comm_bytes=50e6)


def test_comm_alone_is_latency_plus_wire_time() -> None:
    assert comm_alone_s(A2A, TOY_GPU, TOY_CALIBRATION) == pytest.approx(1e-6 + 1e-3, rel=1e-12)


def test_one_op_alone_counts_its_launch() -> None:
    calibration = toy_calibration(host_launch_s=10e-6)
    assert time_op_s(A2A, TOY_GPU, calibration) == pytest.approx(10e-6 + 1e-6 + 1e-3, rel=1e-12)


def test_time_task_lists_the_task_ops_in_program_order() -> None:
    """The forward of stage 0 of a 1-layer model on one node: every op once, inside the task's span."""
    model = model_preset("mixtral-8x7b").with_(num_layers=1)
    workload = StepWorkload(model, layout_preset("megascale-moe").with_(pp=1), 8, 8, 1, 2048)
    timed = time_task(workload, ClusterSpec(gpu=TOY_GPU, num_gpus=8), 0, Task(FORWARD, 0, 0), TOY_CALIBRATION)
    assert [t.op for t in timed.ops] == list(workload.task_ops(workload.task_key(0, Task(FORWARD, 0, 0))))
    assert min(t.start_s for t in timed.ops) >= 0.0
    assert max(t.end_s for t in timed.ops) == pytest.approx(timed.duration_s, rel=1e-12)
    assert set(timed.exposed_comm_s) <= {"sp", "ep"} and timed.compute_busy_s <= timed.duration_s


def test_fig16_pair_without_a_fused_op_is_an_error() -> None:
    """A renamed fused op used to fall back silently to the unfused time (a 1.00x speedup)."""
    unfused = {"qkv_proj": 2.0, "sp_a2a_qkv": 1.0}
    assert pair_speedup(unfused, {"sp_a2a_qkv+qkv_proj": 2.0}, "qkv_proj", "sp_a2a_qkv") == 1.5
    with pytest.raises(ValueError, match=r"qkv_proj\+sp_a2a_qkv or sp_a2a_qkv\+qkv_proj"):
        pair_speedup(unfused, {"qkv_proj+other": 2.0}, "qkv_proj", "sp_a2a_qkv")
    with pytest.raises(ValueError, match="sp_a2a_qkv"):
        pair_speedup({"qkv_proj": 2.0}, {"qkv_proj+sp_a2a_qkv": 2.0}, "qkv_proj", "sp_a2a_qkv")
