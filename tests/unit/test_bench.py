"""`moesim bench` produces its rows (structure only: wall-clock numbers depend on the machine)."""

from __future__ import annotations

import json
import math

import pytest

from experiments.cli import bench
from experiments.cli.bench import POINTS, SLOW, BenchPoint, Steps, format_bench, measure, represented_ops, run_bench
from experiments.cli.main import main
from simulator.engine.engine import EngineResult
from simulator.engine.probes import Probe, observing, subscribed
from simulator.report.simulate import simulate
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

NAMES = {
    "table3-megascale-240",
    "table3-megascale-1440",
    "table3-megatron-240",
    "qwen3-235b-h100-gbs2048",
    "qwen3-235b-h100-gbs8192",
    "search-1000",
    "search-1000-dask-1",  # the same search on a dask LocalCluster of 1 and 2 workers (issue 16: scaling)
    "search-1000-dask-2",
    "validate",
    "reproduce-all",
    "oplevel-megascale-1440",
    "bare-simpy",
}


def test_the_rows_the_issue_asks_for() -> None:
    assert {point.name for point in POINTS} == NAMES
    assert set(SLOW) <= NAMES


@pytest.mark.benchmark
def test_bench_rows_structure() -> None:
    rows = run_bench(quiet=True)
    assert [row["point"] for row in rows] == ["warm-up"] + [p.name for p in POINTS if p.name not in SLOW]
    assert all(row["wall_s"] > 0 and row["cpu_s"] >= 0 for row in rows)
    single = [row for row in rows if "step_time_s" in row]
    assert {row["point"] for row in single} >= {"table3-megascale-240", "qwen3-235b-h100-gbs8192"}
    assert all(math.isfinite(row["step_time_s"]) and row["steps"] == 1 for row in single)
    assert "search-1000: mixtral-8x7b on 128 h100" in format_bench(rows)


def test_a_single_point_row_and_its_json(capsys: pytest.CaptureFixture[str]) -> None:
    """A step's row: wall and CPU time, its step (equal to simulate()'s), ops, memory; --json prints it."""
    point = BenchPoint("tiny", gpus=240, global_batch=60)
    row = measure(point)
    assert row["step_time_s"] == simulate("paper-352b", "megascale-moe", 240, global_batch=60).step_time_s
    assert row["steps"] == 1 and row["micro_batches"] == 30 and row["steady_runs"] == []  # 30 < 2 x 35 + 1
    assert row["simulated_ops"] > 0 and row["represented_ops"] > row["simulated_ops"] and row["peak_mem_mib"] > 0
    # the per-op ratio divides the engine's CPU time by the bare simpy event's, timed after this row's run (once:
    # a memoized step run again would find its task timings made)
    assert row["cost_per_op_vs_simpy"] == pytest.approx(
        row["engine_cpu_s"] / row["simulated_ops"] / (row["event_us"] * 1e-6)
    )
    assert len(row["ratio_runs"]) == 1 and row["ratio_runs"][0] == pytest.approx(row["cost_per_op_vs_simpy"])
    assert "tiny" in format_bench([row])
    assert main(["bench", "--point", "bare-simpy", "--json"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    data = json.loads(line)
    assert data["point"] == "bare-simpy" and data["wall_s"] > 0 and data["event_us"] > 0
    assert main(["bench", "--point", "nope"]) == 2


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
    assert all(0 < r.sim_wall_s and 0 < r.sim_cpu_s for r in seen.results)


def test_steps_probe_sees_an_extrapolated_step_once() -> None:
    """Steps reads results only, so the shortcut may run: it is told of the step, not of the shorter runs."""
    seen = Steps()
    with observing(seen):
        report = simulate("paper-352b", "megascale-moe", 240)
    assert report.steady_runs and len(seen.results) == 1 and seen.results[0].sim_cpu_s > 0
    assert seen.results[0].step_time_s == report.step_time_s and seen.workloads[0].micro_batches == 360


def test_the_op_level_ratio_is_the_least_engine_over_the_least_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """At op level the row's run and RATIO_RUNS - 1 more alternate with bare loops; the ratio divides the least
    engine CPU time by the least loop's, and each pair's own ratio is kept (engine 10 ops; times in us)."""
    engine_cpu_s = iter([50e-6, 40e-6, 60e-6, 45e-6, 55e-6])
    loop_s = iter([2.0e-6, 2.5e-6, 1.6e-6, 2.0e-6, 4.0e-6])
    monkeypatch.setattr(bench, "RATIO_RUNS", 5)
    monkeypatch.setattr(bench, "bare_event_s", lambda: next(loop_s))

    def step() -> dict:
        result = EngineResult(1.0, [], 10, 0.0, {}, sim_cpu_s=next(engine_cpu_s))
        for probe in subscribed(()):
            probe.on_run(result)
        return {}

    seen = Steps()
    with observing(seen):
        step()
    engine_s, event_s, ratios = bench._ratio_runs(BenchPoint("x", memoize=False), step, seen.results, 10)
    assert (engine_s, event_s) == (40e-6, 1.6e-6)  # the least of each: 40 / 10 / 1.6 = 2.5 bare events an op
    assert ratios == pytest.approx([50 / 10 / 2.0, 40 / 10 / 2.5, 60 / 10 / 1.6, 45 / 10 / 2.0, 55 / 10 / 4.0])


def test_the_warm_up_runs_first_and_leaves_no_timings() -> None:
    """The warm-up row comes before the rows of this process (none before bare simpy alone) and drops the task
    timings it made, so that no row finds its own made."""
    from simulator.engine.timer import TIMINGS

    rows = run_bench([BenchPoint("tiny", gpus=240, global_batch=30)], quiet=True)
    assert [row["point"] for row in rows] == ["warm-up", "tiny"] and "before the rows" in rows[0]["note"]
    assert [row["point"] for row in run_bench([p for p in POINTS if p.name == "bare-simpy"], quiet=True)] == [
        "bare-simpy"
    ]
    bench.warm_up()
    assert len(TIMINGS) == 0


# On a dask cluster under -m benchmark only: the same search on dask is the default run's
# tests/differential/test_distributed.py test_a_search_on_dask_ranks_the_rows_found_here; this adds the bench's own
# cluster start and stop (5 s of a 2-core default run).
@pytest.mark.xdist_group("dask_cluster")
@pytest.mark.parametrize("dask_workers", [0, pytest.param(1, marks=pytest.mark.benchmark)])
def test_the_search_rows_job_on_a_small_search(
    monkeypatch, capsys: pytest.CaptureFixture[str], dask_workers: int
) -> None:
    """search-1000's job, cut to 12 points of 16 GPUs, locally and on a dask cluster of 1 worker: one JSON line with
    the points, those skipped by their bounds, and the search's seconds apart from the cluster's start and stop."""
    if dask_workers:
        pytest.importorskip("dask.distributed")
    monkeypatch.setattr(bench, "SEARCH", {"model": "mixtral-8x7b", "gpus": 16, "cluster": "h100", "jobs": 2})
    monkeypatch.setattr(bench, "SEARCH_POINTS", 12)
    bench.search_points(dask_workers)
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["points"] == 12 and 0 <= result["skipped"] < 12
    assert result["search_s"] > 0 and result["cluster_start_s"] >= 0 and result["cluster_stop_s"] >= 0
