"""Tests for the Chrome trace exporter and ``moesim run --trace``."""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import pairwise

import pytest

from experiments.cli import main
from simulator.trace import COMPUTE_T, simulate_with_trace

SMALL = ["--gpus", "240", "--global-batch", "30"]


def _threads(trace: dict) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}


def _by_thread(trace: dict) -> dict[tuple[int, int], list[dict]]:
    events = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            events[(e["pid"], e["tid"])].append(e)
    return events


def _assert_no_overlap(trace: dict) -> None:
    for key, events in _by_thread(trace).items():
        events.sort(key=lambda e: e["ts"])
        for before, after in pairwise(events):
            assert before["ts"] + before["dur"] <= after["ts"] + 1e-6, (key, before, after)


def test_cli_trace_file(tmp_path) -> None:
    """--trace writes a parseable file with named processes, one thread per stream, and small filters."""
    path = tmp_path / "t.json"
    assert main(["run", *SMALL, "--trace", str(path), "--trace-stages", "0,3", "--trace-micro-batches", "2"]) == 0
    trace = json.loads(path.read_text())
    processes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert processes == {1: "stage 0 (node 0, GPU 0)", 4: "stage 3 (node 3, GPU 0)"}
    names = set(_threads(trace).values())
    assert {"pipeline tasks", "compute", "NVLink comm", "NVLink (fused)", "NIC comm (PP)", "NIC comm (DP)"} <= names
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == COMPUTE_T]
    assert ops and all(e["args"]["micro_batch"] < 2 for e in ops)
    assert all("layer" in e["args"] and "kind" in e["args"] for e in ops)
    assert any("flops" in e["args"] for e in ops)
    assert any(e["ph"] == "C" for e in trace["traceEvents"])
    _assert_no_overlap(trace)


@pytest.mark.parametrize("layout", ["megascale-moe", "megatron-lm"])
def test_compute_track_matches_stage_busy(layout: str) -> None:
    """Compute-track busy time per stage equals the engine's compute_busy_s; threads never overlap."""
    report, result, trace, *_ = simulate_with_trace("paper-352b", layout, 240, global_batch=30)
    _assert_no_overlap(trace)
    threads = _threads(trace)
    for (pid, tid), events in _by_thread(trace).items():
        if threads[(pid, tid)] == COMPUTE_T:
            busy_s = sum(e["dur"] for e in events) / 1e6
            assert busy_s == pytest.approx(result.stages[pid - 1].compute_busy_s, rel=1e-6)
    critical = max(result.stages, key=lambda log: log.end_s)
    assert report.compute_busy_s == critical.compute_busy_s


def test_flows_and_counters() -> None:
    """Every PP send gets a flow start and finish; NIC utilisation stays within [0, 1]."""
    run = simulate_with_trace("paper-352b", "megascale-moe", 240, global_batch=30)
    trace = run.trace
    sends = [t for t in run.timeline.transfers if t.kind == "pp"]
    starts = [e for e in trace["traceEvents"] if e["ph"] == "s"]
    finishes = [e for e in trace["traceEvents"] if e["ph"] == "f"]
    assert len(starts) == len(finishes) == len(sends) == 2 * 14 * 15
    assert {e["id"] for e in starts} == {e["id"] for e in finishes}
    values = [e["args"]["value"] for e in trace["traceEvents"] if e["ph"] == "C"]
    assert max(values) <= 1.0 + 1e-9 and min(values) >= 0.0 and max(values) > 0.5


def test_interleaved_trace() -> None:
    """Interleaved 1F1B: tasks carry chunks; flows still pair up."""
    from workloads.layouts import layout_preset

    layout = layout_preset("megascale-moe").with_(schedule="interleaved", virtual_stages=2, pp=6)
    run = simulate_with_trace("paper-352b", layout, 240, global_batch=30)
    _assert_no_overlap(run.trace)
    assert len([e for e in run.trace["traceEvents"] if e["ph"] == "f"]) == len(
        [t for t in run.timeline.transfers if t.kind == "pp"]
    )
