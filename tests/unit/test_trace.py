"""Tests for the Chrome trace exporter and ``moesim run --trace``."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from functools import cache
from itertools import pairwise

import pytest

from experiments.cli.main import main
from simulator.engine.engine import Engine
from simulator.engine.faults import Faults
from simulator.outputs.trace import COMPUTE_T, NIC_EP_T, NIC_PP_T, TASKS, Timeline, chrome_trace
from simulator.outputs.trace_files import TracedRun, simulate_with_trace, stream_trace, write_trace
from tests.toys import EQUAL_STAGES, toy_calibration, toy_gpu
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.schedules.base import BACKWARD, FORWARD, Task
from workloads.specs.layouts import layout_preset

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


@cache
def _traced(layout: str) -> TracedRun:
    """The paper's model on 240 GPUs, 30 sequences, traced: one run for the tests that only read it."""
    return simulate_with_trace("paper-352b", layout, 240, global_batch=30)


@pytest.mark.parametrize("layout", ["megascale-moe", "megatron-lm"])
def test_compute_track_matches_stage_busy(layout: str) -> None:
    """Compute-track busy time per stage equals the engine's compute_busy_s; threads never overlap."""
    report, result, trace, *_ = _traced(layout)
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
    run = _traced("megascale-moe")
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
    layout = layout_preset("megascale-moe").with_(schedule="interleaved", virtual_stages=2, pp=6)
    run = simulate_with_trace("paper-352b", layout, 240, global_batch=30)
    _assert_no_overlap(run.trace)
    assert len([e for e in run.trace["traceEvents"] if e["ph"] == "f"]) == len(
        [t for t in run.timeline.transfers if t.kind == "pp"]
    )


def _spans(trace: dict, pid: int, thread: str) -> list[tuple[float, float, str]]:
    """(start us, end us, name) of the events on one named thread of a process."""
    tid = next(t for (p, t), name in _threads(trace).items() if p == pid and name == thread)
    events = sorted(
        (e for e in trace["traceEvents"] if e["ph"] == "X" and (e["pid"], e["tid"]) == (pid, tid)),
        key=lambda e: e["ts"],
    )
    return [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in events]


def test_two_stage_trace_hand_computed() -> None:
    """PP 2, one micro-batch, no DP (tests/scenarios/test_pipeline.py's two-stage case): F on stage 0, the activation
    send, F and B on stage 1, the gradient send, B on stage 0. Each send waits the 5 us NIC latency, then
    moves 1 x 4096 / 8 x 2048 x 2 = 2,097,152 B at 50 GB/s: 41.94304 us on the NIC thread."""
    layout = layout_preset("megascale-moe").with_(pp=2, micro_batch=1)
    cluster = ClusterSpec(toy_gpu(), 16, 8, nic_bandwidth_Bps=50e9, nic_efficiency=1.0, nic_latency_s=5e-6)
    workload = StepWorkload(EQUAL_STAGES, layout, 16, 8, 1, 4096)
    cal = toy_calibration(attention_bwd_efficiency=0.4, all_to_all_efficiency=0.75)
    timeline = Timeline()
    engine = Engine(workload, cluster, cal, probes=(timeline,))
    engine.run()
    f0, f1, b1, b0 = (
        engine.task_timing(workload.task_key(stage, Task(kind, 0, 0)), stage).duration_s * 1e6
        for stage, kind in ((0, FORWARD), (1, FORWARD), (1, BACKWARD), (0, BACKWARD))
    )
    wire, latency = 41.94304, 5.0
    back = f0 + latency + wire + f1 + b1  # stage 1's B ends; the gradient send starts
    trace = chrome_trace(timeline)
    expected = {
        (1, TASKS): [(0.0, f0, "F0"), (back + latency + wire, back + latency + wire + b0, "B0")],
        (1, NIC_PP_T): [(f0 + latency, f0 + latency + wire, "PP fwd mb0 -> stage 1")],
        (2, TASKS): [(f0 + latency + wire, f0 + latency + wire + f1, "F0"), (f0 + latency + wire + f1, back, "B0")],
        (2, NIC_PP_T): [(back + latency, back + latency + wire, "PP bwd mb0 -> stage 0")],
    }
    for (pid, thread), spans in expected.items():
        got = _spans(trace, pid, thread)
        assert [name for *_, name in got] == [name for *_, name in spans]
        assert [t for a, b, _ in got for t in (a, b)] == pytest.approx(
            [t for a, b, _ in spans for t in (a, b)], abs=2e-3
        )
    # The ops of stage 1's forward fill it: the first starts with the task, the last ends with it.
    ops = [s for s in _spans(trace, 2, COMPUTE_T) if s[1] <= f0 + latency + wire + f1 + 2e-3]
    assert ops[0][0] == pytest.approx(f0 + latency + wire, abs=2e-3)
    assert max(b for _, b, _ in ops) == pytest.approx(f0 + latency + wire + f1, abs=2e-3)
    _assert_no_overlap(trace)


def test_memoized_and_op_level_traces_agree() -> None:
    """Memoized tasks replay intervals timed apart; op-level tasks record theirs in the step: same events."""
    traces = [
        simulate_with_trace(
            "mixtral-8x7b",
            layout_preset("megascale-moe").with_(pp=4),
            64,
            global_batch=8,
            seq_len=4096,
            memoize=memoize,
        ).trace
        for memoize in (True, False)
    ]
    memo, op_level = ([e for e in t["traceEvents"] if e["ph"] == "X"] for t in traces)
    assert [(e["name"], e["pid"], e["tid"]) for e in memo] == [(e["name"], e["pid"], e["tid"]) for e in op_level]
    assert [e["ts"] for e in memo] == pytest.approx([e["ts"] for e in op_level], abs=2e-3)
    assert [e["dur"] for e in memo] == pytest.approx([e["dur"] for e in op_level], abs=4e-3)


def _check_trace_file(path) -> dict:
    """A written trace parses, its durations are non-negative and no thread's events overlap."""
    trace = json.loads(path.read_text())
    assert all(e["dur"] >= 0 for e in trace["traceEvents"] if e["ph"] == "X")
    _assert_no_overlap(trace)
    return trace


def _compute_busy_matches(run) -> None:
    """Each stage's compute thread adds up to the engine's compute-busy time (fused GEMMs at their real speed)."""
    threads = _threads(run.trace)
    busy: dict[int, float] = defaultdict(float)
    for (pid, tid), events in _by_thread(run.trace).items():
        if threads[(pid, tid)].startswith(COMPUTE_T):
            busy[pid - 1] += sum(e["dur"] for e in events) / 1e6
    for stage, log in enumerate(run.result.stages):
        assert busy[stage] == pytest.approx(log.compute_busy_s, rel=1e-6)


STRAGGLER = ["--straggler", "17:1.2"]  # GPU 17: replica 0, stage 2, local rank 1
CROSS_NODE_EP = [
    "--model",
    "deepseekmoe",
    "--gpus",
    "32",
    "--global-batch",
    "8",
    "--seq-len",
    "4096",
    "--ep",
    "16",
    "--set",
    "pp=2",
]  # EP 16 over two nodes: task collectives on the NIC, run at op level


def test_straggler_trace_and_plot(tmp_path) -> None:
    """--trace and --plot with a fault: the straggler's stage has its own (slower) op intervals."""
    trace_path, plot_path = tmp_path / "t.json", tmp_path / "t.png"
    assert main(["run", *SMALL, *STRAGGLER, "--trace", str(trace_path), "--plot", str(plot_path)]) == 0
    _check_trace_file(trace_path)
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    run = simulate_with_trace(
        "paper-352b", "megascale-moe", 240, global_batch=30, faults=Faults(stragglers=[(17, 1.2)])
    )
    assert run.report.faults == ["straggler 17:1.2"]
    _compute_busy_matches(run)
    stages = run.result.stages
    assert stages[2].compute_busy_s > 1.1 * stages[1].compute_busy_s  # same layers, 1.2 x slower kernels


def test_cross_node_ep_trace_and_plot(tmp_path) -> None:
    """--trace and --plot of a cross-node EP run: EP collectives on a NIC thread, NIC counters within [0, 1]."""
    trace_path, plot_path = tmp_path / "t.json", tmp_path / "t.png"
    assert main(["run", *CROSS_NODE_EP, "--trace", str(trace_path), "--plot", str(plot_path)]) == 0
    trace = _check_trace_file(trace_path)
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert NIC_EP_T in set(_threads(trace).values())
    values = [e["args"]["value"] for e in trace["traceEvents"] if e["ph"] == "C"]
    assert max(values) <= 1.0 + 1e-9 and min(values) >= 0.0 and max(values) > 0.5
    layout = layout_preset("megascale-moe").with_(ep=16, pp=2)
    run = simulate_with_trace("deepseekmoe", layout, 32, global_batch=8, seq_len=4096)
    assert run.workload.tasks_use_nic
    _compute_busy_matches(run)


def test_steady_state_ops_drawn_once_and_gzip(tmp_path) -> None:
    """all_ops=False: a steady-state task (micro-batch pp + 1 .. m - pp - 2) whose op intervals equal an earlier
    task's of the same kind draws none; its task event names that twin, one marker per stage says where it
    starts, and the drawn compute plus each elided task's twin's still adds up to the engine's compute time.
    A .json.gz path writes the same JSON gzipped, byte for byte the same each time."""
    run = simulate_with_trace("paper-352b", "megascale-moe", 240, global_batch=90)  # PP 15, 45 micro-batches
    full = run.trace  # the default trace, built once: small, so every op (chrome_trace's all_ops=True)
    assert full["otherData"]["ops_drawn"] == "all"
    short = chrome_trace(run.timeline, all_ops=False)
    markers = [e for e in short["traceEvents"] if e["ph"] == "i"]
    assert [e["pid"] for e in markers] == list(range(1, 16))  # F16 is drawn, its twins from F17 on are not
    assert all(e["args"]["first_elided"] == "F17" and e["args"]["elided_tasks"] > 0 for e in markers)
    tasks = [e for e in short["traceEvents"] if e["ph"] == "X" and e["cat"] == TASKS]
    elided = [e for e in tasks if "ops_as" in e["args"]]
    assert len(elided) == sum(e["args"]["elided_tasks"] for e in markers)
    assert all(16 <= e["args"]["micro_batch"] < 45 - 16 for e in elided)
    ops_of = defaultdict(list)  # (pid, task start) -> op events inside it, from the full trace
    task_spans = {(e["pid"], e["name"]): (e["ts"], e["ts"] + e["dur"]) for e in tasks}
    for e in full["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == COMPUTE_T:
            phase = "F" if e["args"]["direction"] == "forward" else "B"  # 1F1B: F and B tasks only
            ops_of[(e["pid"], f"{phase}{e['args']['micro_batch']}")].append(e)
    for e in elided:  # the twin's ops, moved to this task's start, are this task's ops
        mine = sorted((o["ts"] - e["ts"], o["dur"], o["name"]) for o in ops_of[(e["pid"], e["name"])])
        twin_start = task_spans[(e["pid"], e["args"]["ops_as"])][0]
        theirs = sorted((o["ts"] - twin_start, o["dur"], o["name"]) for o in ops_of[(e["pid"], e["args"]["ops_as"])])
        assert mine and [name for *_, name in mine] == [name for *_, name in theirs]
        assert [t for t, d, _ in mine] == pytest.approx([t for t, d, _ in theirs], abs=2e-3)
    drawn = defaultdict(float)
    for e in short["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == COMPUTE_T:
            drawn[e["pid"]] += e["dur"] / 1e6
    for e in elided:
        drawn[e["pid"]] += sum(o["dur"] for o in ops_of[(e["pid"], e["args"]["ops_as"])]) / 1e6
    for stage, log in enumerate(run.result.stages):
        assert drawn[stage + 1] == pytest.approx(log.compute_busy_s, rel=1e-6)
    assert len(short["traceEvents"]) < 0.8 * len(full["traceEvents"])  # 13 of 45 micro-batches are steady
    # The file checks hold for any trace: stage 0's (elided tasks and their marker included) is written, a
    # fifteenth of the JSON to encode and gzip three times.
    stage0 = chrome_trace(run.timeline, stages=[0], all_ops=False)
    assert [e["pid"] for e in stage0["traceEvents"] if e["ph"] == "i"] == [1]
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    write_trace(plain, stage0)
    assert write_trace(packed, stage0) == packed.stat().st_size < plain.stat().st_size / 5
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    first = packed.read_bytes()
    write_trace(packed, stage0)
    assert packed.read_bytes() == first
    assert main(["run", *SMALL, "--trace", str(tmp_path / "t.gz")]) == 2  # .json.gz, not any .gz


def test_streamed_trace_is_the_built_one_byte_for_byte(tmp_path, monkeypatch) -> None:
    """stream_trace writes chrome_trace's JSON event by event (plain and gzipped, the same bytes as
    write_trace); past the event limit it stops midway and leaves no file, not even a truncated one."""
    run = simulate_with_trace("paper-352b", "megascale-moe", 240, global_batch=30, stages=[0, 7], build=False)
    assert run.trace is None
    built = chrome_trace(run.timeline, stages=[0, 7], all_ops=False)
    for name in ("t.json", "t.json.gz"):
        streamed, written = tmp_path / f"streamed-{name}", tmp_path / f"written-{name}"
        count, size = stream_trace(streamed, run.timeline, stages=[0, 7], all_ops=False)
        assert (count, size) == (len(built["traceEvents"]), write_trace(written, built))
        assert streamed.read_bytes() == written.read_bytes()
    assert json.loads((tmp_path / "streamed-t.json").read_text()) == built
    monkeypatch.setenv("MOESIM_MAX_TRACE_EVENTS", str(len(built["traceEvents"]) // 2))
    with pytest.raises(ConfigError, match="trace events"):
        stream_trace(tmp_path / "cut.json", run.timeline, stages=[0, 7], all_ops=False)
    assert sorted(p.name for p in tmp_path.iterdir() if "cut" in p.name) == []
