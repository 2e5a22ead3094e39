"""Chrome trace-event timelines (Perfetto, chrome://tracing) of one simulated step.

One process per simulated representative GPU (one per pipeline stage), one thread per resource: the
pipeline tasks, the compute stream (SM work; the GEMM part of fused ops), NVLink collectives, NVLink
traffic fused into GEMMs, and the NIC (PP sends; DP buckets). Threads that could overlap get extra
lanes, so no two events on one thread ever overlap. Op timings come from the engine's memoized
per-task op intervals, expanded at each task's begin time; nothing is re-simulated. Runs whose tasks
cannot be memoized (cross-node EP: tasks on the NIC) and runs with faults are refused with a ConfigError.

Placement: ranks are numbered intra-node group fastest, then pipeline stage, then data-parallel
replica, so stage s's representative is global GPU s x intra_size of replica 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from simulator.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.engine import EngineResult, PipelineEngine
from simulator.report import Report, build_report, prepare
from simulator.tasks import OpCosts
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from workloads.layouts import LayoutSpec
from workloads.models import ModelSpec
from workloads.ops import COLLECTIVE, FUSED, Op
from workloads.schedules import FORWARD
from workloads.step import DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN, StepWorkload

TASKS, COMPUTE_T, NVLINK_T, FUSED_T = "pipeline tasks", "compute", "NVLink comm", "NVLink (fused)"
NIC_PP_T, NIC_DP_T = "NIC comm (PP)", "NIC comm (DP)"
TRACKS = (TASKS, COMPUTE_T, NVLINK_T, FUSED_T, NIC_PP_T, NIC_DP_T)
Interval = tuple[float, float, str, dict]  # (start s, end s, name, args)
LinkLog = dict[str, list[tuple[float, float]]]  # counter name -> [(time s, utilisation 0..1)]


def stage_gpu(workload: StepWorkload, stage: int) -> tuple[int, int]:
    """(node, local GPU) of ``stage``'s representative GPU (see module docstring for the placement)."""
    rank = stage * workload.layout.intra_size
    return divmod(rank, workload.gpus_per_node)


def _op_args(op: Op, direction: str, micro_batch: int, chunk: int) -> dict:
    args: dict = {
        "kind": op.kind,
        "layer": op.layer,
        "micro_batch": micro_batch,
        "chunk": chunk,
        "direction": "forward" if direction == FORWARD else "backward",
    }
    if op.flops:
        args["flops"] = op.flops
    if op.gemm is not None:
        args["gemm_mnk_groups"] = [op.gemm.m, op.gemm.n, op.gemm.k, op.gemm.groups]
    if op.mem_bytes:
        args["mem_bytes"] = op.mem_bytes
    if op.is_comm:
        args.update(collective=op.collective, group=op.group, group_size=op.group_size, bytes=op.comm_bytes)
    return args


def stage_intervals(
    workload: StepWorkload,
    cluster: ClusterSpec,
    result: EngineResult,
    stage: int,
    micro_batches: int | None = None,
    calibration: Calibration = DEFAULT_CALIBRATION,
) -> dict[str, list[Interval]]:
    """Absolute (start, end, name, args) intervals of one stage, by track (before lane splitting)."""
    tracks: dict[str, list[Interval]] = {name: [] for name in TRACKS}
    costs: dict[tuple, OpCosts] = {}
    for task, begin, end in result.stages[stage].tasks:
        if micro_batches is not None and task.micro_batch >= micro_batches:
            continue
        key = workload.task_key(stage, task)
        ops = workload.task_ops(key)
        if key not in costs:
            costs[key] = OpCosts.of(ops, cluster.gpu, calibration, cluster.gpu.nvlink_latency_s)
        label = f"{task.direction}{task.micro_batch}" + (f".{task.chunk}" if workload.chunks > 1 else "")
        tracks[TASKS].append(
            (
                begin,
                end,
                label,
                {"micro_batch": task.micro_batch, "chunk": task.chunk, "direction": task.direction, "ops": len(ops)},
            )
        )
        for index, start, stop in result.task_timings[key].intervals:
            op = ops[index]
            args = _op_args(op, task.direction, task.micro_batch, task.chunk)
            a, b = begin + start, begin + stop
            if op.kind == FUSED:
                tracks[COMPUTE_T].append((a, a + costs[key].compute_s[index], op.name, args))
                tracks[FUSED_T].append((a, b, f"{op.name} ({op.collective})", args))
            elif op.kind == COLLECTIVE:
                tracks[NVLINK_T].append((a, b, f"{op.group} {op.collective}", args))
            else:
                tracks[COMPUTE_T].append((a, b, op.name, args))
    for t in result.nic_transfers:
        if t.src != stage:
            continue
        if t.kind == "pp":
            direction, micro_batch, chunk, dst = t.key
            if micro_batches is not None and micro_batch >= micro_batches:
                continue
            name = f"PP {'fwd' if direction == FORWARD else 'bwd'} mb{micro_batch} -> stage {dst}"
            args = {
                "kind": "pp_send",
                "direction": direction,
                "micro_batch": micro_batch,
                "chunk": chunk,
                "dst_stage": dst,
                "bytes": t.nbytes,
            }
        else:
            name, args = f"{t.kind} bucket {t.key[0]}", {"kind": t.kind, "bucket": t.key[0], "bytes": t.nbytes}
        tracks[NIC_PP_T if t.kind == "pp" else NIC_DP_T].append((t.start_s, t.end_s, name, args))
    return tracks


def split_lanes(intervals: list[Interval]) -> list[list[Interval]]:
    """Greedy interval partitioning: the fewest lanes such that no two intervals of a lane overlap."""
    lanes: list[list[Interval]] = []
    for item in sorted(intervals, key=lambda iv: (iv[0], iv[1])):
        for lane in lanes:
            if lane[-1][1] <= item[0] + 1e-12:
                lane.append(item)
                break
        else:
            lanes.append([item])
    return lanes


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def chrome_trace(
    workload: StepWorkload,
    cluster: ClusterSpec,
    result: EngineResult,
    *,
    stages: Iterable[int] | None = None,
    micro_batches: int | None = None,
    link_log: LinkLog | None = None,
    calibration: Calibration = DEFAULT_CALIBRATION,
) -> dict:
    """The trace-event JSON object of a simulated step (optionally only some stages / micro-batches)."""
    keep = sorted(set(range(workload.pp)) if stages is None else {s for s in stages if 0 <= s < workload.pp})
    events: list[dict] = []
    slots: dict[tuple, tuple[int, int, float]] = {}  # PP send key -> (pid, tid, start us) for flows
    for stage in keep:
        pid = stage + 1
        node, local = stage_gpu(workload, stage)
        events.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": pid,
                "tid": 0,
                "args": {"name": f"stage {stage} (node {node}, GPU {local})"},
            }
        )
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": stage}})
        tid = 0
        for track, intervals in stage_intervals(workload, cluster, result, stage, micro_batches, calibration).items():
            for lane_no, lane in enumerate(split_lanes(intervals)):
                tid += 1
                name = track if lane_no == 0 else f"{track} #{lane_no + 1}"
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
                events.append(
                    {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
                )
                for start, end, label, args in lane:
                    ts = _us(start)
                    events.append(
                        {
                            "ph": "X",
                            "name": label,
                            "cat": track,
                            "pid": pid,
                            "tid": tid,
                            "ts": ts,
                            "dur": round(_us(end) - ts, 3),
                            "args": args,
                        }
                    )
                    if track == NIC_PP_T and args.get("kind") == "pp_send":
                        slots[("send", args["direction"], args["micro_batch"], args["chunk"], args["dst_stage"])] = (
                            pid,
                            tid,
                            ts,
                        )
                    if track == TASKS:
                        slots[("task", args["direction"], args["micro_batch"], args["chunk"], stage)] = (pid, tid, ts)
    events += _flows(workload, result, slots, set(keep), micro_batches)
    for name, points in (link_log or {}).items():
        direction, stage = name.split(" ")
        if int(stage) in keep:
            counter = "NIC out utilisation" if direction == "nic_out" else "NIC in utilisation"
            events += [
                {"ph": "C", "name": counter, "pid": int(stage) + 1, "ts": _us(t), "args": {"value": round(u, 4)}}
                for t, u in points
            ]
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "model": workload.model.name,
            "layout": workload.layout.name,
            "gpus": workload.num_gpus,
            "step_time_s": result.step_time_s,
        },
    }


def _flows(
    workload: StepWorkload, result: EngineResult, slots: dict, keep: set[int], micro_batches: int | None
) -> list[dict]:
    """Flow arrows from each PP send on the sender's NIC to the receiving task."""
    events = []
    for number, t in enumerate(t for t in result.nic_transfers if t.kind == "pp"):
        direction, micro_batch, chunk, dst = t.key
        if t.src not in keep or dst not in keep or (micro_batches is not None and micro_batch >= micro_batches):
            continue
        sender = slots.get(("send", *t.key))
        receiver = slots.get(("task", direction, micro_batch, chunk, dst))
        if sender is None or receiver is None:
            continue
        common = {"name": "pp send", "cat": "pp", "id": number + 1}
        events.append({**common, "ph": "s", "pid": sender[0], "tid": sender[1], "ts": sender[2]})
        events.append({**common, "ph": "f", "bp": "e", "pid": receiver[0], "tid": receiver[1], "ts": receiver[2]})
    return events


def record_link_utilisation(engine: PipelineEngine) -> LinkLog:
    """Hook the engine's network to log each NIC link's utilisation whenever rates change."""
    network = engine.network
    log: LinkLog = {f"{d} {s}": [(0.0, 0.0)] for s in range(engine.workload.pp) for d in ("nic_out", "nic_in")}
    reschedule = network._reschedule

    def recording() -> None:
        reschedule()
        load: dict = {}
        for flow in network._flows:
            for link in flow.links:
                load[link] = load.get(link, 0.0) + flow.rate
        for (direction, stage), capacity in network.capacities_Bps.items():
            if direction.startswith("nic"):
                points = log[f"{direction} {stage}"]
                value = load.get((direction, stage), 0.0) / capacity
                if abs(points[-1][1] - value) > 1e-9:
                    points.append((engine.env.now, value))

    network._reschedule = recording
    return log


class TracedRun(NamedTuple):
    """A simulated step with everything needed to draw it."""

    report: Report
    result: EngineResult
    trace: dict | None
    workload: StepWorkload
    cluster: ClusterSpec


def simulate_with_trace(
    model: ModelSpec | str,
    layout: LayoutSpec | str,
    gpus: int | None = None,
    *,
    cluster: ClusterSpec | str | None = None,
    global_batch: int = DEFAULT_GLOBAL_BATCH,
    seq_len: int = DEFAULT_SEQ_LEN,
    micro_batch: int | None = None,
    stages: Iterable[int] | None = None,
    micro_batches: int | None = None,
    calibration: Calibration = DEFAULT_CALIBRATION,
    trace: bool = True,
    allow_oom: bool = False,
) -> TracedRun:
    """Simulate one step like ``simulate`` and also return the raw result and (if asked) its Chrome trace."""
    wall_start = time.perf_counter()
    workload, cluster, oom = prepare(model, layout, gpus, cluster, global_batch, seq_len, micro_batch, allow_oom)
    if workload.tasks_use_nic:  # op timings are read from the memoized task timings, which need NIC-free tasks
        raise ConfigError("trace", "timelines of cross-node EP runs (tasks on the NIC) are not supported yet")
    engine = PipelineEngine(workload, cluster, calibration, memoize=True)
    link_log = record_link_utilisation(engine)
    result = engine.run()
    report = replace(build_report(workload, cluster, result, time.perf_counter() - wall_start), oom=oom)
    events = (
        chrome_trace(
            workload,
            cluster,
            result,
            stages=stages,
            micro_batches=micro_batches,
            link_log=link_log,
            calibration=calibration,
        )
        if trace
        else None
    )
    return TracedRun(report, result, events, workload, cluster)


def write_trace(path: str | Path, trace: dict) -> int:
    """Write the trace as compact JSON; returns the file size in bytes."""
    text = json.dumps(trace, separators=(",", ":"))
    Path(path).write_text(text)
    return len(text)
