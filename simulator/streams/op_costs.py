"""The cost-model numbers of one op list, computed once per task type: each op's compute time, wire bytes,
latency and host launch time, and the dependency structure the op-level engine and its alone-stream layout walk
(simulator/streams/tasks.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from simulator.costs.calibration import Calibration
from simulator.costs.kernels import (
    collective_latency_s,
    collective_wire_bytes,
    comm_kernel_sms,
    compute_time_s,
    executed_work,
    fused_tail_s,
    nic_wire_bytes,
)
from simulator.streams.task_summary import OVERLAPPED, tally_of
from topologies.hardware import GpuSpec, HostCpu
from workloads.ops import COLLECTIVE, FUSED, HOST_SYNC, GraphPart, Group, Module, Op, Role

BACKWARD_ROLES = (Role.INPUT_GRAD, Role.WEIGHT_GRAD)


@dataclass(frozen=True)
class OpCosts:
    """Pre-computed cost-model numbers and dependency structure of one op list (computed once per task type)."""

    compute_s: tuple[float, ...]
    wire_bytes: tuple[float, ...]
    latency_s: tuple[float, ...]
    launch_s: tuple[float, ...]  # host time to issue the op's kernels
    sync_before: tuple[int, ...]  # the last host sync before each op in program order, or -1
    issue_offset_s: tuple[float, ...]  # host launch time from that sync's completion (or the start) to the op
    cross_deps: tuple[tuple[int, ...], ...]  # dependencies on ops of other streams
    waits: tuple[tuple[int, ...], ...]  # ops each op waits for: its host sync, then its cross-stream deps
    signalled: frozenset[int]  # ops whose completion another stream (or the host) waits for
    streams: tuple[tuple[int, ...], ...]  # op indices of each stream, in program order
    nic_bytes: tuple[float, ...] = ()  # cross-node EP bytes over the NIC (empty when no op uses it)
    comm_sms: tuple[int, ...] = ()  # SMs each collective's kernel holds (empty when none holds any)
    sm_count: int = 0  # the GPU's SMs, shared by communication kernels and the compute beside them
    kinds: tuple[str, ...] = ()  # each op's kind, stream, group and model FLOPs (workloads.ops.Op)
    stream_names: tuple[str, ...] = ()
    groups: tuple = ()
    model_flops: tuple[float, ...] = ()
    tiles: tuple[int, ...] = ()  # chunks each fused op pipelines its GEMM and collective in (workloads.ops.Op)
    # Kernels other than collectives on more than one stream (Megatron-Core's combined 1F1B: the combine node's
    # unpermute and residual add on the communication stream): they take turns on the GPU's SMs and communication
    # kernels are admitted in the same queue (simulator.streams.tasks.run_task, with its sources)
    shared_gpu: bool = False

    @cached_property
    def host_ahead_s(self) -> float:
        """The host's issue time of the ops before the task's first host sync (all of them, in a task without one):
        how far ahead of the task's start the host can have issued them (``ahead``)."""
        return max((o for o, sync in zip(self.issue_offset_s, self.sync_before) if sync < 0), default=0.0)

    @cached_property
    def has_host_sync(self) -> bool:
        return HOST_SYNC in self.kinds

    @cached_property
    def last_host_sync(self) -> tuple[int, float]:
        """(the task's last host sync, the host's issue time of the ops after it, from the sync's completion): the
        host is free for the next task that long after the sync completes (-1 and 0.0 in a task without one)."""
        if not self.has_host_sync:
            return -1, 0.0
        last = len(self.kinds) - 1 - self.kinds[::-1].index(HOST_SYNC)
        return last, self.issue_offset_s[-1] if last < len(self.kinds) - 1 else 0.0

    def host_free_s(self, done_at, start_s: float) -> float:
        """When the host had issued the task's last op, from the task's start ``start_s`` (``done_at``: each op's end),
        in a task with a host sync (one without: simulator/engine/host_lead.py times its issuing from its costs)."""
        last, after_s = self.last_host_sync
        return done_at[last] - start_s + after_s

    def ahead(self, lead_s: float) -> OpCosts:
        """These costs for a task the host began issuing ``lead_s`` before the task starts (< 0: after): the ops
        before the first host sync are issued that much earlier (simulator/engine/host_lead.py)."""
        if lead_s == 0.0:
            return self
        offsets = tuple(o - lead_s if sync < 0 else o for o, sync in zip(self.issue_offset_s, self.sync_before))
        return replace(self, issue_offset_s=offsets)

    @cached_property
    def tallies(self) -> tuple[tuple[int, ...], tuple, tuple[float, ...]]:
        """Per op, how its interval counts (simulator.streams.task_summary.tally_of), its group and its model FLOPs."""
        return (
            tuple(tally_of(kind, stream) for kind, stream in zip(self.kinds, self.stream_names)),
            self.groups,
            self.model_flops,
        )

    @cached_property
    def overlapped(self) -> bool:
        """Whether an op's interval counts as OVERLAPPED: a collective whose time busy intervals may hide."""
        return OVERLAPPED in self.tallies[0]

    @cached_property
    def total_flops(self) -> float:
        """The op list's model FLOPs, summed in op order."""
        return sum(self.model_flops)

    @cached_property
    def steps(self) -> tuple[tuple[str, int, float, tuple[int, ...], float], ...]:
        """Per op, what a stream reads to lay it out: (kind, host sync before it, issue offset, waits, compute s)."""
        return tuple(zip(self.kinds, self.sync_before, self.issue_offset_s, self.waits, self.compute_s))

    @cached_property
    def _alone_steps(self) -> dict[tuple[float, bool], tuple]:
        return {}

    def alone_steps(self, rate_Bps: float, own_streams: bool = False) -> tuple[tuple, ...]:
        """``steps`` with, per op, what run_alone reads to time it alone on links of its own at ``rate_Bps``: (how
        it is laid out: _PLAIN, _COLLECTIVE or _FUSED_OP, sync, offset, waits, compute s, and for a collective or
        fused op (None for a plain one, whose tally is BUSY) its wire bytes, comm s, what its end adds (a
        collective's latency, a fused op's tail and latency), its tally and group). Once per op list and rate, so
        laying a task out reads one tuple per op. ``own_streams``: the task runs ``streams`` as they are (no
        lanes), so an op whose host issue comes before its stream can reach it has sync _ISSUED: its issue time
        needs no check."""
        steps = self._alone_steps.get((rate_Bps, own_streams))
        if steps is None:
            issued = self._issued_early() if own_streams else frozenset()
            rows = []
            for index, (kind, sync, offset, waits, compute_s) in enumerate(self.steps):
                sync = _ISSUED if index in issued else sync
                if kind != COLLECTIVE and kind != FUSED:
                    rows.append((_PLAIN, sync, offset, waits, compute_s, None))
                    continue
                nbytes = self.wire_bytes[index]
                comm_s = nbytes / rate_Bps if nbytes > 0 and rate_Bps else 0.0
                extra_s = self.latency_s[index]
                if kind == FUSED:  # the event path's float: tail + latency, added to max(compute, comm) end
                    extra_s = fused_tail_s(compute_s, comm_s, self.tiles[index]) + extra_s
                code = _COLLECTIVE if kind == COLLECTIVE else _FUSED_OP
                comm = (nbytes, comm_s, extra_s, self.tallies[0][index], self.groups[index])
                rows.append((code, sync, offset, waits, compute_s, comm))
            steps = self._alone_steps[(rate_Bps, own_streams)] = tuple(rows)
        return steps

    def _issued_early(self) -> frozenset[int]:
        """Ops issued from the task's start (no host sync before them) at least a nanosecond (and a billionth)
        before the ops ahead of them on their stream can have run: every op ahead takes at least its compute
        time (slowed SMs, a fused op's wire time and tail only add), so the GPU reaches the op after its issue,
        with room for the rounding of a clock counted in seconds."""
        early = set()
        for stream in self.streams:
            ahead_s = 0.0
            for index in stream:
                if self.sync_before[index] < 0 and self.issue_offset_s[index] <= ahead_s * (1 - 1e-9) - 1e-9:
                    early.add(index)
                if self.kinds[index] != COLLECTIVE:
                    ahead_s += self.compute_s[index]
        return frozenset(early)

    @staticmethod
    def of(
        ops: tuple[Op, ...],
        gpu: GpuSpec,
        cal: Calibration,
        te_modules: bool = True,
        ring_shares: tuple[float, float] = (1.0, 1.0),
    ) -> OpCosts:
        """``te_modules``: the ops are Megatron-Core's with Transformer Engine modules (their host time per kernel);
        ``ring_shares``: the share of a dense and an expert DP ring's bytes that one GPU's NIC carries
        (simulator/engine/dp_bytes.py ring_nic_share), which FSDP's per-unit gathers and scatters move."""
        launch = launch_times_s(ops, cal, gpu, te_modules)
        sync_before, offsets = [], []
        sync, offset = -1, 0.0
        for index, op in enumerate(ops):
            offset += launch[index]
            sync_before.append(sync)
            offsets.append(offset)
            if op.kind == HOST_SYNC:  # the host waits here; later issues count from its completion
                sync, offset = index, 0.0
        cross = tuple(tuple(d for d in op.deps if ops[d].stream != op.stream) for op in ops)
        signalled = {d for deps in cross for d in deps} | {i for i, op in enumerate(ops) if op.kind == HOST_SYNC}
        return OpCosts(
            tuple(compute_time_s(op, gpu, cal) for op in ops),
            tuple(collective_wire_bytes(op, cal, gpu) if op.is_comm else 0.0 for op in ops),
            tuple(collective_latency_s(op, gpu, cal) if op.is_comm else 0.0 for op in ops),
            launch,
            tuple(sync_before),
            tuple(offsets),
            cross,
            tuple(((sync,) if sync >= 0 else ()) + deps for sync, deps in zip(sync_before, cross)),
            frozenset(signalled),
            tuple(
                tuple(i for i, op in enumerate(ops) if op.stream == name)
                for name in dict.fromkeys(o.stream for o in ops)
            ),
            tuple(nic_wire_bytes(op) * _ring_share(op, ring_shares) for op in ops)
            if any(op.nic_bytes for op in ops)
            else (),
            sms if any(sms := tuple(comm_kernel_sms(op, cal) for op in ops)) else (),
            gpu.sm_count,
            tuple(op.kind for op in ops),
            tuple(op.stream for op in ops),
            tuple(op.group for op in ops),
            tuple(op.model_flops for op in ops),
            tuple(op.tiles for op in ops),
            len({op.stream for op in ops if op.kind not in (COLLECTIVE, HOST_SYNC)}) > 1,
        )


def _ring_share(op: Op, ring_shares: tuple[float, float]) -> float:
    """The share of ``op``'s NIC bytes one GPU's NIC carries: a DP or expert-DP ring's (FSDP's per-unit collectives),
    else all of them (an EP all-to-all, a CP ring's exchange with its neighbour)."""
    if op.group == Group.DP:
        return ring_shares[0]
    if op.group == Group.EDP:
        return ring_shares[1]
    return 1.0


_PLAIN, _COLLECTIVE, _FUSED_OP = range(3)  # how run_alone lays an op out (OpCosts.alone_steps); _PLAIN is 0
_ISSUED = -2  # OpCosts.alone_steps' sync of an op the host has issued before its stream can reach it


def host_launch_per_kernel_s(cal: Calibration, gpu: GpuSpec, te_modules: bool = True) -> float:
    """The host's CPU time to issue one eager kernel beside ``gpu``, a Grace superchip's or an x86 DGX host's: a
    Transformer Engine module's (``te_modules``: Megatron-Core's layers with TE) or a bare torch op's."""
    grace = gpu.host_cpu is HostCpu.GRACE
    bare = cal.grace_torch_host_launch_s if grace else cal.torch_host_launch_s
    if te_modules or bare is None:
        return cal.grace_host_launch_s if grace else cal.host_launch_s
    return bare


def launch_times_s(ops: tuple[Op, ...], cal: Calibration, gpu: GpuSpec, te_modules: bool = True) -> tuple[float, ...]:
    """Host time to issue each op: the host's time per kernel (``host_launch_s``, or ``grace_host_launch_s`` on a
    Grace host) when launched eagerly; a run of consecutive ops of one CUDA graph (same layer, part and
    direction: Megatron-Core captures forward and backward graphs per layer part) costs one launch, charged to
    its first op (workloads/specs/cuda_graphs.py). mHC's kernels are Megatron-Core's own torch ops (nn.Linear, the
    Sinkhorn loop: megatron/core/transformer/hyper_connection.py at d98e8a64), a bare torch op's each."""
    per_kernel_s = host_launch_per_kernel_s(cal, gpu, te_modules)
    torch_op_s = host_launch_per_kernel_s(cal, gpu, te_modules=False)
    launch, previous = [], None
    for op in ops:
        graph = (op.layer, op.graph, op.role in BACKWARD_ROLES) if op.graph != GraphPart.NONE else None
        if graph is None:
            launch.append(executed_work(op, gpu)[1] * (torch_op_s if op.module == Module.MHC else per_kernel_s))
        else:
            launch.append(0.0 if graph == previous else per_kernel_s)
        previous = graph
    return tuple(launch)
