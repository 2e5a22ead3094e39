"""Op-level execution of one pipeline task on a GPU's streams, in a simpy environment."""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy

from simulator.calibration import Calibration
from simulator.costs import (
    collective_latency_s,
    collective_wire_bytes,
    compute_time_s,
    fused_tail_s,
    nic_wire_bytes,
)
from simulator.network import FluidNetwork
from topologies.hardware import GpuSpec
from workloads.ops import COLLECTIVE, COMPUTE, FUSED, HOST_SYNC, Op


@dataclass
class TaskTiming:
    """What one run of a task's ops took: its span, compute-busy time and exposed comm per group."""

    duration_s: float = 0.0
    compute_busy_s: float = 0.0
    exposed_comm_s: dict[str, float] = field(default_factory=dict)
    model_flops: float = 0.0
    intervals: list[tuple[int, float, float]] = field(default_factory=list)  # (op index, start, end)


@dataclass(frozen=True)
class OpCosts:
    """Pre-computed cost-model numbers of one op list (pure, so computed once per task type)."""

    compute_s: tuple[float, ...]
    wire_bytes: tuple[float, ...]
    latency_s: tuple[float, ...]
    launch_s: tuple[float, ...]  # host time to issue the op's kernels
    nic_bytes: tuple[float, ...] = ()  # cross-node EP bytes over the NIC (empty when no op uses it)

    @staticmethod
    def of(ops: tuple[Op, ...], gpu: GpuSpec, cal: Calibration, step_latency_s: float) -> OpCosts:
        return OpCosts(
            tuple(compute_time_s(op, gpu, cal) for op in ops),
            tuple(collective_wire_bytes(op, cal) if op.is_comm else 0.0 for op in ops),
            tuple(collective_latency_s(op.group_size, step_latency_s) if op.is_comm else 0.0 for op in ops),
            tuple(op.kernels * cal.host_launch_s for op in ops),
            tuple(nic_wire_bytes(op) for op in ops) if any(op.nic_bytes for op in ops) else (),
        )


def run_task(env: simpy.Environment, ops: tuple[Op, ...], costs: OpCosts, network: FluidNetwork,
             comm_links: tuple, timing: TaskTiming, nic_links: tuple = ()) -> simpy.Event:
    """Start the task's streams; the returned event fires when every op is done.

    Ops of one stream run in list order; an op starts when it heads its stream and its dependencies
    are done (CUDA stream semantics). Collectives of a folded group move each member's egress bytes
    over the representative GPU's links: every member does the same at the same time. Ops with NIC
    bytes (cross-node EP) also load ``nic_links``, concurrently with their NVLink bytes.
    """
    done = [env.event() for _ in ops]
    issued = [env.event() for _ in ops]
    env.process(_host(env, ops, costs, done, issued))
    streams: dict[str, list[int]] = {}
    for index, op in enumerate(ops):
        streams.setdefault(op.stream, []).append(index)
    start_s = env.now
    links = (comm_links, nic_links)
    procs = [env.process(_stream(env, ops, indices, costs, network, links, done, issued, timing))
             for indices in streams.values()]
    finished = env.all_of(procs)
    finished.callbacks.append(lambda _e: _summarize(ops, costs, timing, start_s, env.now))
    return finished


def _host(env, ops, costs, done, issued):
    """The host thread issues kernels in program order, each costing launch time; at a device-to-host
    sync it waits for the GPU to reach that point, so the GPU then idles until the host catches up."""
    for index, op in enumerate(ops):
        if costs.launch_s[index]:
            yield env.timeout(costs.launch_s[index])
        issued[index].succeed()
        if op.kind == HOST_SYNC:
            yield done[index]


def _transfer(network: FluidNetwork, costs: OpCosts, links: tuple, index: int) -> simpy.Event:
    """The op's NVLink bytes, and its NIC bytes alongside when it has any."""
    comm_links, nic_links = links
    event = network.transfer(comm_links, costs.wire_bytes[index])
    if costs.nic_bytes and costs.nic_bytes[index] and nic_links:
        event = event & network.transfer(nic_links, costs.nic_bytes[index])
    return event


def _stream(env, ops, indices, costs, network, links, done, issued, timing):
    for index in indices:
        op = ops[index]
        if not issued[index].triggered:
            yield issued[index]
        for dep in op.deps:
            if not done[dep].triggered:
                yield done[dep]
        begin = env.now
        if op.kind == COLLECTIVE:
            if costs.latency_s[index]:
                yield env.timeout(costs.latency_s[index])
            yield _transfer(network, costs, links, index)
        elif op.kind == FUSED:
            compute_s = costs.compute_s[index]
            comm = _transfer(network, costs, links, index)
            comm_end = []
            comm.callbacks.append(lambda _e: comm_end.append(env.now))
            yield env.timeout(compute_s) & comm
            comm_s = comm_end[0] - begin
            yield env.timeout(fused_tail_s(compute_s, comm_s, op.tiles) + costs.latency_s[index])
        else:
            yield env.timeout(costs.compute_s[index])
        timing.intervals.append((index, begin, env.now))
        done[index].succeed()


def _summarize(ops, costs, timing: TaskTiming, start_s: float, end_s: float) -> None:
    """Fill in busy and exposed-communication times from the recorded intervals."""
    timing.duration_s = end_s - start_s
    busy: list[tuple[float, float]] = []
    exposed: dict[str, float] = {}
    overlapped: list[tuple[int, float, float]] = []
    for index, begin, end in timing.intervals:
        op = ops[index]
        timing.model_flops += op.model_flops
        if op.kind == FUSED:
            busy.append((begin, begin + costs.compute_s[index]))
            exposed[op.group] = exposed.get(op.group, 0.0) + (end - begin) - costs.compute_s[index]
        elif op.kind == COLLECTIVE and op.stream == COMPUTE:
            exposed[op.group] = exposed.get(op.group, 0.0) + (end - begin)
        elif op.kind == COLLECTIVE:
            overlapped.append((index, begin, end))
        else:
            busy.append((begin, end))
    timing.compute_busy_s = sum(end - begin for begin, end in busy)
    busy.sort()
    for index, begin, end in overlapped:
        hidden = sum(max(0.0, min(end, b_end) - max(begin, b_begin)) for b_begin, b_end in busy)
        group = ops[index].group
        exposed[group] = exposed.get(group, 0.0) + max(0.0, (end - begin) - hidden)
    timing.exposed_comm_s = exposed
