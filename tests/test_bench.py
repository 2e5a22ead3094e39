"""`moesim bench` produces its table (structure only: wall-clock numbers depend on the machine)."""

from __future__ import annotations

import math

import pytest

from experiments.bench import POINTS, Steps, format_bench, represented_ops, run_bench
from simulator.probes import Probe, observing
from simulator.report import simulate
from workloads.layouts import layout_preset
from workloads.models import model_preset
from workloads.step import StepWorkload

COLUMNS = {
    "point",
    "gpus",
    "steps",
    "wall_s",
    "engine_s",
    "simulated_ops",
    "represented_ops",
    "ops_per_s",
    "cost_per_op_vs_simpy",
    "cost_per_step_op_vs_simpy",
    "peak_mem_mib",
    "step_time_s",
}


@pytest.mark.benchmark
def test_bench_table_structure() -> None:
    frame = run_bench()
    assert COLUMNS <= set(frame.columns)
    assert list(frame["point"]) == [point.name for point in POINTS]
    assert (frame["wall_s"] > 0).all() and (frame["simulated_ops"] > 0).all()
    assert (frame["represented_ops"] >= frame["simulated_ops"]).all()
    assert (frame["peak_mem_mib"] > 0).all()
    assert frame.attrs["bare_event_s"] > 0
    single = frame[frame["steps"] == 1]
    assert all(math.isfinite(step) and step > 0 for step in single["step_time_s"])
    assert frame.loc[frame["point"] == "reproduce-all", "steps"].item() > 1
    assert "bare simpy timeout" in format_bench(frame)


def test_represented_ops_counts_every_task() -> None:
    workload = StepWorkload(model_preset("paper-352b"), layout_preset("megascale-moe"), 1440, 8, 720, 8192)
    per_task = {
        key: len(workload.task_ops(key))
        for key in {workload.task_key(s, t) for s in range(workload.pp) for t in workload.stage_order(s)}
    }
    tasks = sum(len(workload.stage_order(s)) for s in range(workload.pp))
    assert min(per_task.values()) * tasks <= represented_ops(workload) <= max(per_task.values()) * tasks


class _OpsSeen(Probe):
    """Counts the ops of every task the engine ran (each op leaves one interval)."""

    def __init__(self) -> None:
        self.ops = 0

    def on_task(self, place, stage, task, begin_s, end_s, timing) -> None:
        self.ops += len(timing.intervals)


def test_steps_probe_counts_every_run_inside_its_block() -> None:
    """Two steps inside the block are counted with their real op counts; one after it is not."""
    seen, ops = Steps(), _OpsSeen()
    with observing(seen, ops):
        first = simulate("paper-352b", "megascale-moe", 240, global_batch=30)
        second = simulate("paper-352b", "megatron-lm", 240, global_batch=30)
    simulate("paper-352b", "megascale-moe", 240, global_batch=30)
    assert len(seen.workloads) == len(seen.results) == 2
    assert [r.step_time_s for r in seen.results] == [first.step_time_s, second.step_time_s]
    assert [r.simulated_ops for r in seen.results] == [first.simulated_ops, second.simulated_ops]
    assert [w.layout.name for w in seen.workloads] == ["megascale-moe", "megatron-lm"]
    assert ops.ops == sum(represented_ops(w) for w in seen.workloads)
    assert all(0 < r.sim_wall_s for r in seen.results)
