"""A task of several streams on a link of its own, timed at op level without simpy events (simulator/streams/tasks.py).

A task whose streams share nothing with the rest of the step (the folded stage's NVLink, one link that no
one else's flows use; no NIC bytes, no F&B lanes or kernels taking turns on a shared GPU (OpCosts.shared_gpu),
no probe watching rates) evolves from its start by its own ops alone: its whole timeline is known when it
starts. ``solve`` lays it out op by op with the event path's rules and arithmetic, so the task costs one simpy
timeout instead of an event per kernel start, rate change and flow end:

- each stream runs its ops in order, an op once its host issue time has come and the ops it waits for are done;
- a collective holds its SMs (``costs.comm_sms``) from its start, waits its latency, then moves its bytes
  as a flow; compute (plain kernels, fused GEMMs) progresses at the rate the held SMs leave
  (simulator/streams/sm_share.py), re-planned from the work left whenever a collective starts or ends;
- flows share the link equally (max-min on one link), the remaining bytes advanced and a flow finished
  as simulator/streams/network.py does (within ``network._DONE_BYTES`` of done);
- a fused op ends its tail (simulator.costs.kernels.fused_tail_s) after the later of its GEMM and its flow;
- a stream whose fellow streams all wait for it lays its ops out alone (simulator.streams.alone.run_alone), as the
  event path's quiet streams do.

The times are the event path's to rounding (tests/scenarios/test_closed_task.py compares them, tasks.CLOSED off).
"""

from __future__ import annotations

from simulator.costs.kernels import fused_tail_s
from simulator.streams.alone import Quiet, TaskTiming, run_alone
from simulator.streams.network import _DONE_BYTES, FluidNetwork
from simulator.streams.op_costs import OpCosts
from simulator.streams.task_summary import Tally
from workloads.ops import COLLECTIVE, FUSED, HOST_SYNC, Op

# What a stream is doing: ready to start its next op, waiting for an op of another stream, waiting until a
# time (an issue time, a fused op's tail, ops laid out alone), computing, in a collective's latency or flow,
# in a fused op, or done.
_READY, _BLOCKED, _UNTIL, _COMPUTE, _LATENCY, _FLOW, _FUSED, _DONE = range(8)


_NEVER = float("inf")


class _Stream:
    """One stream's progress: its next op (``position``), the op in progress (``index`` from ``begin``), the
    instant its state next changes (``at``), and, while it computes, ``left_s`` of idle-GPU work at ``since``
    progressing at ``rate`` (simulator.streams.sm_share._Run's re-planning)."""

    __slots__ = (
        "at", "begin", "comm_end", "computing", "gemm_end", "held", "index", "indices", "left_s", "number",
        "position", "rate", "seen", "since", "state",
    )  # fmt: skip

    def __init__(self, number: int, indices: tuple[int, ...]) -> None:
        self.number, self.indices, self.position, self.state, self.at = number, indices, 0, _READY, _NEVER
        self.index, self.begin, self.held, self.seen = -1, 0.0, 0, -1
        self.computing = False
        self.left_s = self.since = self.rate = 0.0
        self.gemm_end: float | None = None
        self.comm_end: float | None = None

    def compute(self, work_s: float, now: float, rate: float) -> None:
        self.computing, self.left_s, self.since, self.rate = True, work_s, now, rate
        self.at = now + work_s / rate

    def retime(self, now: float, rate: float) -> None:
        """The rate changes at ``now``: the work done at the old rate is kept (simulator.streams.sm_share._Run.retime)."""
        left_s = self.left_s - (now - self.since) * self.rate
        self.left_s = 0.0 if 0.0 > left_s else left_s  # noqa: FURB136 (max(left_s, 0.0), no builtin call)
        self.since, self.rate = now, rate
        self.at = now + self.left_s / rate


def closed(network: FluidNetwork, comm_links: tuple, costs: OpCosts) -> bool:
    """Whether a task with no ``transfer`` and no lanes is closed: its one link is the whole of an idle network
    that no probe watches, and no op moves NIC bytes."""
    return (
        len(comm_links) == 1
        and len(network.capacities_Bps) == 1
        and comm_links[0] in network.capacities_Bps
        and not network.active_flows
        and not network.observers
        and not costs.nic_bytes
    )


def solve(
    ops: tuple[Op, ...],
    costs: OpCosts,
    network: FluidNetwork,
    comm_links: tuple,
    timing: TaskTiming,
    start_s: float,
    tally: Tally,
) -> float:
    """Lay out a closed task started at ``start_s``: its op intervals into ``timing`` (fused GEMM times too where
    SMs are shared) and ``tally``, its bytes counted on the link. Returns its end."""
    streams = [_Stream(number, indices) for number, indices in enumerate(costs.streams)]
    steps, comm_sms, latency_s, wire_bytes = costs.steps, costs.comm_sms, costs.latency_s, costs.wire_bytes
    shares_sms = bool(comm_sms) and len(streams) > 1  # simulator.streams.tasks.run_task builds an SmShare
    sm_count = costs.sm_count
    (link,) = comm_links
    capacity_Bps = network.capacities_Bps[link]
    sent = network.bytes_sent
    quiet = Quiet(1, network, comm_links, True)
    done_at: list[float | None] = [None] * len(ops)
    intervals, slowed = timing.intervals, timing.slowed_gemm_s
    signalled = costs.signalled
    tallies, groups = costs.tallies[0], costs.groups
    flows: list[list] = []  # [bytes left, stream] of each flow on the link, in start order
    flow_rate, flows_at, wake = 0.0, start_s, _NEVER  # the network's share, last advance and next wake
    held, rate = 0, 1.0
    now = start_s
    ended = 0  # ops ended so far: a stream noted blocked since then may be free

    def set_held(delta: int) -> None:
        nonlocal held, rate
        held += delta
        free = sm_count - held
        rate = (1 if 1 > free else free) / sm_count  # noqa: FURB136 (max(free, 1) / sm_count)
        for other in streams:
            if other.computing:
                other.retime(now, rate)

    def advance_flows() -> None:
        nonlocal flows_at
        elapsed = now - flows_at
        if elapsed > 0:
            for flow in flows:
                flow[0] -= flow_rate * elapsed
        flows_at = now

    def reschedule() -> None:
        nonlocal flow_rate, wake
        if flows:
            flow_rate = capacity_Bps / len(flows)
            least = flows[0][0]  # the network's min over remaining / rate: one rate for all, so the same float
            for flow in flows:
                if flow[0] < least:  # noqa: PLR1730
                    least = flow[0]
            delay_s = least / flow_rate
            wake = now + (0.0 if 0.0 > delay_s else delay_s)  # noqa: FURB136 (max(delay_s, 0.0))
        else:
            wake = _NEVER

    def start_flow(number: int, nbytes: float) -> bool:
        """Count the bytes; False if there are none to move (the transfer is done at once)."""
        sent[link] += nbytes
        if nbytes <= 0:
            return False
        advance_flows()
        flows.append([float(nbytes), number])
        reschedule()
        return True

    todo: list[_Stream] = list(streams)  # streams to try their next op now, in stream order
    blocked: list[_Stream] = []  # streams that wait for an op not done yet (tried again once ops end)

    def finish(stream: _Stream, end_s: float, gemm_s: float = 0.0) -> None:
        """The stream's op ends at ``end_s`` (now, or a fused op's tail later; ``gemm_s``: a fused op's GEMM)."""
        nonlocal ended
        index = stream.index
        begin, end = stream.begin - start_s, end_s - start_s
        if intervals is not None:  # None: not recorded
            intervals.append((index, begin, end))
        tally.add(index, begin, end, tallies[index], groups[index], gemm_s)
        done_at[index] = end_s
        ended += 1
        stream.position += 1
        stream.computing = False
        if end_s > now:  # resume(stream, end_s), inlined
            stream.state, stream.at = _UNTIL, end_s
        else:
            stream.state, stream.at = _READY, _NEVER
            todo.append(stream)

    def resume(stream: _Stream, at_s: float) -> None:
        """The stream may start its next op at ``at_s``: wait until then, or be started in this instant."""
        if at_s > now:
            stream.state, stream.at = _UNTIL, at_s
        else:
            stream.state, stream.at = _READY, _NEVER
            todo.append(stream)

    def fused_done(stream: _Stream) -> None:
        index, begin = stream.index, stream.begin
        gemm_s = stream.gemm_end - begin
        if shares_sms:
            slowed[index] = gemm_s
        else:
            gemm_s = steps[index][4]
        comm_s = stream.comm_end - begin
        tail_s = fused_tail_s(gemm_s, comm_s, costs.tiles[index]) + latency_s[index]
        finish(stream, now + tail_s, gemm_s)

    def alone(stream: _Stream) -> bool:
        """Whether every other stream is done or waits for an op not done yet."""
        for other in streams:
            if other is stream or other.state == _DONE:
                continue
            if other.state != _BLOCKED:
                return False
            if other.seen != ended:  # freed since it was noted blocked?
                for op in steps[other.indices[other.position]][3]:
                    if done_at[op] is None:
                        break
                else:
                    return False
        return True

    def start(stream: _Stream) -> None:
        """Start the stream's next op if it can now; else note what it waits for."""
        nonlocal ended
        if stream.position == len(stream.indices):
            stream.state, stream.at = _DONE, _NEVER
            return
        index = stream.indices[stream.position]
        kind, sync, offset, waits, compute_s = steps[index]
        ready = now
        for other in waits:
            end = done_at[other]
            if end is None:
                stream.state, stream.at, stream.seen = _BLOCKED, _NEVER, ended
                blocked.append(stream)
                return
            if end > ready:  # noqa: PLR1730 (no builtin call per op)
                ready = end
        issued = (done_at[sync] if sync >= 0 else start_s) + offset
        if issued > ready:  # noqa: PLR1730
            ready = issued
        if ready > now:
            stream.state, stream.at = _UNTIL, ready
            return
        if alone(stream):
            # NOTE: everyone else waits for this stream (and so holds no SMs and moves no flow): lay out alone
            position, clock = run_alone(
                ops,
                stream.indices,
                stream.position,
                now,
                costs,
                done_at,
                signalled,
                start_s,
                timing,
                quiet,
                shares_sms,
                tally,
            )
            if position > stream.position:
                ended += position - stream.position
                stream.position = position
                resume(stream, clock)
                return
        stream.index, stream.begin = index, now
        if kind == COLLECTIVE:
            stream.held = comm_sms[index] if shares_sms else 0
            if stream.held:
                set_held(stream.held)
            if latency_s[index]:
                stream.state, stream.at = _LATENCY, now + latency_s[index]
            else:
                collective_flow(stream)
        elif kind == FUSED:
            stream.state = _FUSED
            stream.gemm_end = None
            stream.comm_end = None if start_flow(stream.number, wire_bytes[index]) else now
            stream.compute(compute_s, now, rate if shares_sms else 1.0)  # unshared: a plain timeout
        elif kind == HOST_SYNC or not shares_sms:
            finish(stream, now + compute_s)
        else:
            stream.state = _COMPUTE
            stream.compute(compute_s, now, rate)

    def collective_flow(stream: _Stream) -> None:
        stream.state, stream.at = _FLOW, _NEVER
        if not start_flow(stream.number, wire_bytes[stream.index]):
            collective_done(stream)

    def collective_done(stream: _Stream) -> None:
        if stream.held:
            set_held(-stream.held)
            stream.held = 0
        finish(stream, now)

    while True:
        while True:  # start what can start now
            if blocked and blocked[0].seen != ended:  # ops ended since the first one blocked: try them again
                todo.extend(blocked)
                blocked.clear()
            if not todo:
                break
            start(todo.pop(0))
        next_s = wake  # the next instant anything ends
        for stream in streams:
            if stream.at < next_s:  # noqa: PLR1730 (no builtin call per stream and instant)
                next_s = stream.at
        if next_s == _NEVER:
            if any(stream.state != _DONE for stream in streams):
                waiting = [stream.indices[stream.position] for stream in streams if stream.state != _DONE]
                raise RuntimeError(f"closed task: ops {waiting} wait for ops that never end")
            if costs.has_host_sync:
                timing.host_free_s = costs.host_free_s(done_at, start_s)
            return now
        now = next_s
        if wake == now:  # the network wakes: finish the flows that are done (simulator/streams/network.py)
            advance_flows()
            finished = []
            for flow in flows:  # NOTE: a loop, not a list comprehension's call
                if flow[0] <= _DONE_BYTES:
                    finished.append(flow)
            if not finished:
                finished = [min(flows, key=lambda flow: flow[0] / flow_rate)]
            for flow in finished:
                flows.remove(flow)
            reschedule()
            for _, number in finished:
                stream = streams[number]
                if stream.state == _FLOW:
                    collective_done(stream)
                else:
                    stream.comm_end = now
                    if stream.gemm_end is not None:
                        fused_done(stream)
        for stream in streams:
            if stream.at != now:
                continue
            state = stream.state
            if state == _UNTIL:
                stream.state, stream.at = _READY, _NEVER
                todo.append(stream)
            elif state == _LATENCY:
                collective_flow(stream)
            elif state == _COMPUTE:
                finish(stream, now)
            elif state == _FUSED:
                stream.computing, stream.gemm_end, stream.at = False, now, _NEVER
                if stream.comm_end is not None:
                    fused_done(stream)
