"""`moesim bench` produces its table (structure only: wall-clock numbers depend on the machine)."""

from __future__ import annotations

import math

import pytest

from experiments.bench import POINTS, format_bench, represented_ops, run_bench
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


def test_recording_restores_the_engine_even_on_error() -> None:
    """The bench wraps PipelineEngine.run only while it measures, and puts it back whatever happens."""
    from experiments.bench import _recording
    from simulator.engine import PipelineEngine

    original = PipelineEngine.run
    with pytest.raises(RuntimeError), _recording():
        assert PipelineEngine.run is not original
        raise RuntimeError("boom")
    assert PipelineEngine.run is original
