"""Chrome trace-event timelines (Perfetto, chrome://tracing) of one simulated step.

One process per simulated representative GPU (one per pipeline stage), one thread per resource: the
pipeline tasks, the compute stream (SM work; the GEMM part of fused ops), NVLink collectives, NVLink
traffic fused into GEMMs, and the NIC (PP sends; DP buckets; cross-node EP collectives). Threads that
could overlap get extra lanes, so no two events on one thread ever overlap. Everything comes from a
``Timeline`` probe (simulator/engine/probes.py) that records each task as it ends, with the op intervals it
actually had (memoized or op level, faulty stages included), the transfers as they land, and NIC
utilisation whenever rates change; nothing is re-simulated.

Placement: stage s's representative is GPU Place(0, s, 0) of simulator/engine/ranks.py's numbering.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from simulator.engine.engine import Engine, EngineResult
from simulator.engine.faults import scale_compute
from simulator.engine.probes import Probe, Transfer
from simulator.engine.ranks import Place, RankMap
from simulator.outputs.trace_size import check_trace_events, kept_stages
from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import OpCosts
from simulator.streams.tasks import TaskTiming
from workloads.graph.step import StepWorkload
from workloads.ops import COLLECTIVE, FUSED, Op
from workloads.recipes.layers import te_layers
from workloads.schedules.base import FORWARD, Task

TASKS, COMPUTE_T, NVLINK_T, FUSED_T = "pipeline tasks", "compute", "NVLink comm", "NVLink (fused)"
NIC_PP_T, NIC_DP_T, NIC_EP_T = "NIC comm (PP)", "NIC comm (DP)", "NIC comm (EP)"
TRACKS = (TASKS, COMPUTE_T, NVLINK_T, FUSED_T, NIC_EP_T, NIC_PP_T, NIC_DP_T)
MARKER = "marker"  # not a thread: instant events on the pipeline-task thread
MARKER_NAME = "steady state: ops of later tasks drawn once (see each task's ops_as)"
ELIDE_ABOVE = 300_000  # op events past which a trace draws each steady-state task's ops once (about 70 MB)
Interval = tuple[float, float, str, dict]  # (start s, end s, name, args)
LinkLog = dict[str, list[tuple[float, float]]]  # counter name -> [(time s, utilisation 0..1)]


def stage_gpu(workload: StepWorkload, stage: int) -> tuple[int, int]:
    """(node, local GPU) of ``stage``'s representative GPU (replica 0, rank 0 in simulator/engine/ranks.py)."""
    return divmod(RankMap.of(workload).gpu(Place(0, stage, 0)), workload.gpus_per_node)


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
    if op.nic_bytes:
        args["nic_bytes"] = op.nic_bytes
    return args


class TaskRecord(NamedTuple):
    """One task as it ran: its span in the step and its op intervals (from ``begin_s``)."""

    task: Task
    begin_s: float
    end_s: float
    timing: TaskTiming


class Timeline(Probe):
    """Records what a trace draws: each place's tasks, the PP and DP transfers, NIC utilisation, the result."""

    def __init__(self) -> None:
        self.tasks: dict[Place, list[TaskRecord]] = {}  # by place (folded: replica 0, rank 0 of each stage)
        self.transfers: list[Transfer] = []
        self.links: LinkLog = {}
        self.result: EngineResult | None = None

    def on_start(self, engine: Engine) -> None:
        self.workload, self.cluster, self.calibration = engine.workload, engine.cluster, engine.cal
        self.compute_factors = [fault.compute_factor for fault in engine.stage_faults]
        self._network = engine.network
        self._nic = [
            (link, f"{link[0]} {link[1]}")
            for link in engine.network.capacities_Bps
            # the stages' representatives' NICs (a healthy replica class's, simulator/engine/replica_classes.py, not)
            if isinstance(link, tuple) and len(link) == 2 and link[0] in ("nic_out", "nic_in")
        ]
        self.links = {name: [(0.0, 0.0)] for _, name in self._nic}

    def on_task(self, place: Any, stage: int, task: Task, begin_s: float, end_s: float, timing: TaskTiming) -> None:
        self.tasks.setdefault(place, []).append(TaskRecord(task, begin_s, end_s, timing))

    def on_transfer(self, transfer: Transfer) -> None:
        self.transfers.append(transfer)

    def on_link_rates(self, network: FluidNetwork) -> None:
        """Log each NIC link's utilisation when it changes (the NICs are on the engine's main network)."""
        if network is not self._network:
            return
        loads = network.link_loads_Bps()
        for link, name in self._nic:
            points = self.links[name]
            value = loads.get(link, 0.0) / network.capacities_Bps[link]
            if abs(points[-1][1] - value) > 1e-9:
                points.append((network.env.now, value))

    def on_run(self, result: EngineResult) -> None:
        self.result = result


def stage_intervals(
    timeline: Timeline, stage: int, micro_batches: int | None = None, elide: bool = False
) -> dict[str, list[Interval]]:
    """Absolute (start, end, name, args) intervals of one stage, by track (before lane splitting). With
    ``elide``, the ops of a steady-state task whose op intervals equal (to the trace's nanosecond) those of a
    task of the same kind already drawn are left out; its task event names that twin (``ops_as``), and a
    MARKER instant event on the task track says where leaving out starts."""
    workload, gpu = timeline.workload, timeline.cluster.gpu
    tracks: dict[str, list[Interval]] = {name: [] for name in (*TRACKS, MARKER)}
    costs: dict = {}
    drawn: dict[tuple, str] = {}  # (task key, op intervals in ns) -> label of the task drawn with them
    elided = 0
    for task, begin, end, timing in timeline.tasks.get(Place(0, stage, 0), ()):
        if micro_batches is not None and task.micro_batch >= micro_batches:
            continue
        key = workload.task_key(stage, task)
        ops = workload.task_ops(key)
        if key not in costs:  # the fused GEMMs' compute time, as the engine charged it (stragglers scale it)
            plain = OpCosts.of(ops, gpu, timeline.calibration, te_layers(workload.layout))
            costs[key] = scale_compute(plain, ops, timeline.compute_factors[stage])
        label = f"{task.direction}{task.micro_batch}" + (f".{task.chunk}" if workload.chunks > 1 else "")
        args = {"micro_batch": task.micro_batch, "chunk": task.chunk, "direction": task.direction, "ops": len(ops)}
        tracks[TASKS].append((begin, end, label, args))
        if elide and _steady(workload, task):
            pattern = (key, tuple((i, round(a * 1e9), round(b * 1e9)) for i, a, b in timing.intervals))
            twin = drawn.setdefault(pattern, label)
            if twin != label:
                args["ops_as"] = twin
                if not elided:
                    tracks[MARKER].append((begin, begin, MARKER_NAME, {"first_elided": label}))
                elided += 1
                continue
        for index, start, stop in timing.intervals:
            op = ops[index]
            args = _op_args(op, task.direction, task.micro_batch, task.chunk)
            a, b = begin + start, begin + stop
            if op.kind == FUSED:
                gemm_s = timing.slowed_gemm_s.get(index, costs[key].compute_s[index])  # beside other comm: slower
                tracks[COMPUTE_T].append((a, a + gemm_s, op.name, args))
                tracks[FUSED_T].append((a, b, f"{op.name} ({op.collective})", args))
            elif op.kind == COLLECTIVE:
                tracks[NVLINK_T].append((a, b, f"{op.group} {op.collective}", args))
            else:
                tracks[COMPUTE_T].append((a, b, op.name, args))
            if op.nic_bytes:  # cross-node EP: the same op also loads the NIC
                tracks[NIC_EP_T].append((a, b, f"{op.name} (NIC)", args))
    for t in timeline.transfers:
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
    if elided:
        tracks[MARKER][0][3]["elided_tasks"] = elided
    return tracks


def _steady(workload: StepWorkload, task: Task) -> bool:
    """Whether ``task`` is past the first and before the last pp + 1 micro-batches (kept in full detail)."""
    keep = workload.pp + 1
    return keep <= task.micro_batch < workload.micro_batches - keep


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


def op_events(timeline: Timeline, stages: Iterable[int], micro_batches: int | None = None) -> int:
    """How many op intervals the kept stages' tasks have (what a trace with every op draws)."""
    return sum(
        len(record.timing.intervals)
        for stage in stages
        for record in timeline.tasks.get(Place(0, stage, 0), ())
        if micro_batches is None or record.task.micro_batch < micro_batches
    )


def chrome_trace(
    timeline: Timeline,
    *,
    stages: Iterable[int] | None = None,
    micro_batches: int | None = None,
    all_ops: bool | None = None,
) -> dict:
    """The trace-event JSON object of a recorded step (optionally only some stages / micro-batches). With
    ``all_ops`` False, each steady-state task's ops are drawn once (stage_intervals' ``elide``); None (default):
    so only when every op would make more than ELIDE_ABOVE events. ``stream_trace`` writes the same JSON
    without holding the events."""
    keep = kept_stages(timeline.workload, stages)
    all_ops = draw_all_ops(timeline, keep, micro_batches, all_ops)
    return {"traceEvents": list(trace_events(timeline, keep, micro_batches, all_ops)), **trace_meta(timeline, all_ops)}


def draw_all_ops(timeline: Timeline, keep: list[int], micro_batches: int | None, all_ops: bool | None) -> bool:
    return op_events(timeline, keep, micro_batches) <= ELIDE_ABOVE if all_ops is None else all_ops


def trace_meta(timeline: Timeline, all_ops: bool) -> dict:
    """The trace object's keys after its events."""
    workload = timeline.workload
    return {
        "displayTimeUnit": "ms",
        "otherData": {
            "model": workload.model.name,
            "layout": workload.layout.name,
            "gpus": workload.num_gpus,
            "step_time_s": timeline.result.step_time_s,
            "ops_drawn": "all" if all_ops else MARKER_NAME,
        },
    }


def trace_events(timeline: Timeline, keep: list[int], micro_batches: int | None, all_ops: bool) -> Iterator[dict]:
    """The trace's events one by one, stage by stage, then the PP flow arrows and the NIC counters; past the
    trace-event limit (workloads/specs/limits.py) a ConfigError stops them."""
    workload = timeline.workload
    count = 0
    slots: dict[tuple, tuple[int, int, float]] = {}  # PP send key -> (pid, tid, start us) for flows
    for stage in keep:
        check_trace_events(count)
        pid = stage + 1
        node, local = stage_gpu(workload, stage)
        yield {
            "ph": "M",
            "name": "process_name",
            "pid": pid,
            "tid": 0,
            "args": {"name": f"stage {stage} (node {node}, GPU {local})"},
        }
        yield {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": stage}}
        count += 2
        tid = 0
        tracks = stage_intervals(timeline, stage, micro_batches, elide=not all_ops)
        for start, _, label, args in tracks.pop(MARKER):
            yield {"ph": "i", "s": "t", "name": label, "pid": pid, "tid": 1, "ts": _us(start), "args": args}
            count += 1
        for track, intervals in tracks.items():
            for lane_no, lane in enumerate(split_lanes(intervals)):
                tid += 1
                name = track if lane_no == 0 else f"{track} #{lane_no + 1}"
                yield {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
                yield {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
                count += 2 + len(lane)
                for start, end, label, args in lane:
                    ts = _us(start)
                    yield {
                        "ph": "X",
                        "name": label,
                        "cat": track,
                        "pid": pid,
                        "tid": tid,
                        "ts": ts,
                        "dur": round(_us(end) - ts, 3),
                        "args": args,
                    }
                    if track == NIC_PP_T and args.get("kind") == "pp_send":
                        slots[("send", args["direction"], args["micro_batch"], args["chunk"], args["dst_stage"])] = (
                            pid,
                            tid,
                            ts,
                        )
                    if track == TASKS:
                        slots[("task", args["direction"], args["micro_batch"], args["chunk"], stage)] = (pid, tid, ts)
    for event in _flows(timeline, slots, set(keep), micro_batches):
        yield event
        count += 1
    for name, points in timeline.links.items():
        direction, stage = name.split(" ")
        if int(stage) in keep:
            counter = "NIC out utilisation" if direction == "nic_out" else "NIC in utilisation"
            for t, u in points:
                yield {"ph": "C", "name": counter, "pid": int(stage) + 1, "ts": _us(t), "args": {"value": round(u, 4)}}
            count += len(points)
    check_trace_events(count)


def _flows(timeline: Timeline, slots: dict, keep: set[int], micro_batches: int | None) -> list[dict]:
    """Flow arrows from each PP send on the sender's NIC to the receiving task."""
    events = []
    for number, t in enumerate(t for t in timeline.transfers if t.kind == "pp"):
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
