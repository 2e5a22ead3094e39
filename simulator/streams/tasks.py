"""Op-level execution of one pipeline task on a GPU's streams, in a simpy environment."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import simpy

from simulator.costs.kernels import (
    fused_tail_s,
)
from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import _COLLECTIVE, OpCosts
from simulator.streams.sm_share import SmShare
from simulator.streams.task_summary import EXPOSED, FUSED_OP, Tally, close, summarize
from simulator.streams.turns import GRANTED, Turns
from workloads.ops import COLLECTIVE, FUSED, HOST_SYNC, Op


@dataclass
class TaskTiming:
    """What one run of a task's ops took: its span, compute-busy time and exposed comm per group."""

    duration_s: float = 0.0
    compute_busy_s: float = 0.0
    exposed_comm_s: dict[str, float] = field(default_factory=dict)
    model_flops: float = 0.0
    # (op, start, end) from the task start; None: not recorded (no one reads them; the event path records them all
    # the same, as it sums them at the task's end)
    intervals: list[tuple[int, float, float]] | None = field(default_factory=list)
    slowed_gemm_s: dict[int, float] = field(default_factory=dict)  # fused ops: GEMM time on the SMs left to it


def run_task(
    env: simpy.Environment,
    ops: tuple[Op, ...],
    costs: OpCosts,
    network: FluidNetwork,
    comm_links: tuple,
    timing: TaskTiming,
    transfer: Callable[[int, float], simpy.Event] | None = None,
    lanes: tuple[int, ...] | None = None,
    nic_links: tuple = (),
    nic_network: FluidNetwork | None = None,
) -> simpy.Event:
    """Start the task's streams; the returned event fires when every op is done.

    Ops of one stream run in list order; an op starts when it heads its stream, the host has issued it
    and its dependencies are done (CUDA stream semantics). The host issues kernels in program order,
    each costing its launch time, and at a device-to-host sync waits for the GPU to reach it, so the GPU
    then idles until the host catches up. Collectives of a folded group move each member's egress bytes
    over the representative GPU's links: every member does the same at the same time. ``transfer(op
    index, wire bytes)``, if given, replaces that (the unfolded engine moves real per-member flows).
    Ops with NIC bytes (cross-node EP) also load ``nic_links`` (on ``nic_network``, default ``network``),
    concurrently with their NVLink bytes.
    With ``lanes`` (DualPipe's F&B) each lane has its own streams and the lanes' compute-stream ops take
    turns on the GPU (one at a time, first come first served), so one lane computes while the other
    communicates; collectives and host syncs take no turn (NCCL kernels run beside compute, as
    DeepSeek-V3 Sec. 3.2.2). Whenever more than one stream runs, a collective's kernel holds its SMs
    (``costs.comm_sms``) and the compute beside it runs on the rest (simulator.streams.sm_share).

    NOTE: for speed, a stream advances its own clock arithmetically through compute ops and yields to
    simpy only where time must pass for others: before a collective, before waiting on another stream,
    and when an op another stream waits for completes. Compute durations are fixed, so this is exact.
    On a link of its own (the folded stage's NVLink, no NIC bytes, no lanes, no rate observers) a stream
    whose fellow streams all wait for its signals advances through collectives and fused ops the same way
    (_Quiet): nothing can share its link or SMs until it signals.
    """
    start_s = env.now
    if lanes:
        lane_streams: dict[tuple[int, str], list[int]] = {}
        for index, op in enumerate(ops):
            lane_streams.setdefault((lanes[index], op.stream), []).append(index)
        streams = list(lane_streams.values())
    else:
        streams = costs.streams
    if transfer is None and len(streams) == 1 and not network.active_flows and not costs.nic_bytes:
        # NOTE: one stream on an idle link of its own: every transfer is a lone flow at the link's rate, so
        # the whole task is arithmetic, laid out now, and costs one simpy event (same times as the event path).
        alone, tally = _Quiet(1, network, comm_links, True), Tally(costs)
        done_at: list[float | None] = [None] * len(ops)
        _, end_s = _run_alone(
            ops, range(len(ops)), 0, start_s, costs, done_at, {}, start_s, timing, alone, False, tally
        )
        return _ends_at(env, end_s, ops, costs, timing, tally)
    if CLOSED and transfer is None and not lanes:
        closed_task = _closed_task or _import_closed_task()
        if closed_task.closed(network, comm_links, costs):
            # NOTE: no one else's flows, SMs or turns can reach the task: its whole timeline is laid out now, at
            # its start (simulator/streams/closed_task.py), and it costs one simpy event.
            tally = Tally(costs)
            end_s = closed_task.solve(ops, costs, network, comm_links, timing, start_s, tally)
            return _ends_at(env, end_s, ops, costs, timing, tally)
    # The stage's own NVLink network (folded placement): only this task's streams move flows on it (and no probe
    # watches its rates).
    # NOTE: a task with NIC bytes has its NVLink to itself too: only its ops with NIC bytes take the event path
    own_link = transfer is None and not lanes and not network.observers and (QUIET_BESIDE_NIC or not costs.nic_bytes)
    if transfer is None:
        nic_bytes, nic_net = costs.nic_bytes if nic_links else (), nic_network or network

        def transfer(index: int, nbytes: float) -> simpy.Event | tuple[simpy.Event, simpy.Event]:
            event = network.transfer(comm_links, nbytes)
            if nic_bytes and nic_bytes[index]:
                event = both(env, event, nic_net.transfer(nic_links, nic_bytes[index]))
            return event

    if timing.intervals is None:  # the event path sums the intervals at the task's end (summarize)
        timing.intervals = []
    done_at: list[float | None] = [None] * len(ops)
    signals: dict[int, simpy.Event] = {}  # ops another stream waits for now: the event it waits on
    gpu = Turns(env) if lanes else None
    sms = SmShare(env, costs.sm_count) if costs.comm_sms and len(streams) > 1 else None
    quiet = _Quiet(len(streams), network, comm_links, own_link, costs.nic_bytes if nic_links else ()) if QUIET else None
    procs = [
        env.process(_stream(env, ops, indices, costs, transfer, done_at, signals, start_s, timing, gpu, sms, quiet))
        for indices in streams
    ]
    finished = env.all_of(procs)
    finished.callbacks.append(lambda _e: summarize(ops, costs, timing, start_s, env.now, bool(lanes)))
    return finished


_closed_task = None  # simulator/streams/closed_task.py, once run_task has asked for it


def _import_closed_task():
    """simulator/streams/closed_task.py, imported where run_task first needs it: it builds on this module.

    NOTE: kept in a global: an import statement per task costs more than a global's lookup."""
    global _closed_task
    from simulator.streams import closed_task

    _closed_task = closed_task
    return closed_task


def both(env: simpy.Environment, first: simpy.Event, second: simpy.Event) -> tuple[simpy.Event, simpy.Event]:
    """``first & second`` as the pair itself: a collective's stream yields each in turn and so resumes when the
    later of the two is processed, an event step before ``first & second`` would have resumed it (the same
    instant); a fused op, which notes when its transfer ends, joins them (_joined)."""
    return first, second


def _joined(env: simpy.Environment, first: simpy.Event, second: simpy.Event) -> simpy.Event:
    """An event that fires once ``first`` and ``second`` have: ``first & second``'s event steps (it is scheduled
    when the later of the two is processed), without building a simpy Condition and its value."""
    done = env.event()
    left = [2]

    def count(_event: simpy.Event) -> None:
        left[0] -= 1
        if not left[0]:
            done.succeed()

    for event in (first, second):
        if event.callbacks is None:  # already processed
            count(event)
        else:
            event.callbacks.append(count)
    return done


def _ends_at(env: simpy.Environment, end_s: float, ops, costs: OpCosts, timing: TaskTiming, tally: Tally):
    """A task laid out now, at its start, ends at ``end_s``: one timeout, which fills in its summary when it
    fires (as a task's processes do when they end: before whoever waits for it resumes)."""
    start_s = env.now
    finished = env.timeout(end_s - start_s)
    finished.callbacks.append(lambda _e: close(ops, costs, timing, tally, start_s, env.now))
    return finished


def _run_alone(ops, indices, position, clock, costs, done_at, stops, start_s, timing, quiet, record_gemm, tally=None):
    """Lay out a stream's ops from ``indices[position]`` on (issued from ``clock`` on) as arithmetic, with the
    GPU (and, if ``quiet.own_link``, its links) to themselves: up to and including the first op in ``stops``
    (another stream waits for it), or up to the first that waits for an op not done (or, without a link of
    its own, the first collective or fused op). Returns the position after the last op laid out and its
    end. ``record_gemm``: note each fused op's GEMM time, as the SM-sharing event path does. ``tally``: add
    each op to it (simulator.streams.task_summary.Tally.add, inlined) as it is laid out.

    A collective or fused op alone ends as the event path would time it with the SMs to itself and its lone
    flow at the links' bottleneck ``quiet.rate_Bps``: its per-op numbers are read from ``costs.alone_steps``
    and its bytes counted on the links as network.account does."""
    intervals, own_link = timing.intervals, quiet.own_link  # intervals None: not recorded
    steps = quiet.steps  # NOTE: asked of costs once per task (a task's calls all pass a tally, or none)
    if steps is None:
        steps = quiet.steps = costs.alone_steps(quiet.rate_Bps, tally is not None)  # (a tally: closed or 1 stream)
    links, sent, nic = quiet.links, quiet.network.bytes_sent, quiet.nic_bytes
    laid = position
    busy_s = 0
    tallied = tally is not None
    if tallied:
        exposed = tally.exposed
    # NOTE: comparisons, not max(): a builtin call per op costs more than the rest of a plain op's arithmetic
    for index in indices[position:] if position else indices:
        code, sync, offset, waits, compute_s, comm = steps[index]
        if waits:
            for other in waits:
                end = done_at[other]
                if end is None:
                    break
                if end > clock:  # noqa: PLR1730
                    clock = end
            if end is None:  # it waits for an op not done
                break
        if sync != -2:  # not _ISSUED: the host may not have issued it yet
            issued = (done_at[sync] if sync >= 0 else start_s) + offset
            if issued > clock:  # noqa: PLR1730
                clock = issued
        begin = clock
        if not code:  # _PLAIN (its tally is BUSY)
            clock += compute_s
            if tallied:
                # NOTE: busy time laid out alone is not kept for hiding (Tally.busy): the other streams wait for
                # this one, so their collectives ended before it began and start after it ends; none hides behind it
                busy_s += (clock - start_s) - (begin - start_s)
        elif not own_link or (nic and nic[index]):  # its NIC flow may meet others': the event path times it
            break
        else:
            nbytes, comm_s, extra_s, kind, group = comm
            for link in links:
                sent[link] += nbytes
            if code == _COLLECTIVE:
                clock = begin + extra_s + comm_s
            else:
                gemm_end = begin + compute_s
                comm_end = begin + comm_s
                clock = (gemm_end if gemm_end >= comm_end else comm_end) + extra_s  # noqa: FURB136
                if record_gemm:
                    timing.slowed_gemm_s[index] = compute_s = gemm_end - begin
            if tallied:
                rel_begin, rel_end = begin - start_s, clock - start_s
                if kind == FUSED_OP:  # compute_s: its GEMM time
                    busy_s += (rel_begin + compute_s) - rel_begin
                    exposed[group] = exposed.get(group, 0.0) + (rel_end - rel_begin) - compute_s
                elif kind == EXPOSED:
                    exposed[group] = exposed.get(group, 0.0) + (rel_end - rel_begin)
                else:
                    tally.overlapped.append((index, rel_begin, rel_end))
        if intervals is not None:
            intervals.append((index, begin - start_s, clock - start_s))
        done_at[index] = clock
        laid += 1
        if index in stops:
            break
    if tallied:
        tally.busy_s += busy_s
    return laid, clock


class _Quiet:
    """Which stream of a task may act now: while every other stream waits for a signal from the one that runs,
    nothing can hold SMs or ask for the GPU's turn beside its compute, so it lays that out as arithmetic and
    lets time pass only where it signals another stream. On a link of its own (``own_link``: no one else's
    flows) nothing can share its collectives' and fused ops' link either, so it times those too
    (_run_alone); otherwise (the NIC beside PP and DP traffic, the unfolded placement's
    flows) they take the event path."""

    __slots__ = ("links", "network", "nic_bytes", "own_link", "rate_Bps", "running", "steps", "waiters")

    def __init__(self, streams: int, network: FluidNetwork, links: tuple, own_link: bool, nic_bytes=()) -> None:
        self.running = streams  # streams not waiting for a signal (a stream not started yet counts)
        self.waiters: dict[int, int] = {}  # op -> streams waiting for its signal
        self.network, self.links, self.own_link = network, links, own_link
        self.nic_bytes = nic_bytes  # per op, bytes it moves over the NIC too (empty: none)
        self.rate_Bps = min(map(network.capacities_Bps.__getitem__, links)) if own_link and links else 0.0
        self.steps: tuple | None = None  # _run_alone's OpCosts.alone_steps, once it has asked

    def block(self, op: int) -> None:
        self.running -= 1
        self.waiters[op] = self.waiters.get(op, 0) + 1

    def wake(self, op: int) -> None:
        """``op``'s signal fired: its waiters resume at this instant, so they count as running from now."""
        self.running += self.waiters.pop(op, 0)

    def alone(self, kind: str, index: int) -> bool:
        """Whether the running stream may lay out its next op, ``index`` of ``kind``, as arithmetic."""
        if kind == COLLECTIVE or kind == FUSED:
            nic = self.nic_bytes
            return self.own_link and self.running == 1 and not self.network.active_flows and not (nic and nic[index])
        return self.running == 1


# A stream of a task on a link of its own times its ops as arithmetic while the others wait for it (_Quiet);
# False steps every op with events (tests/scenarios/test_quiet_streams.py compares the two).
QUIET = True

# A quiet stream of a task with NIC bytes also times its ops without NIC bytes on its own NVLink as arithmetic (its
# NIC ops take the event path: others' flows may meet them); False: only compute, as before (tests/scenarios/test_quiet_streams.py).
QUIET_BESIDE_NIC = True

# A task of several streams that shares nothing with the rest of the step is laid out at its start as arithmetic
# (simulator/streams/closed_task.py); False runs its streams as simpy processes (tests/scenarios/test_closed_task.py compares the two).
CLOSED = True

# Plain compute ops of a multi-stream task run back to back as one timeout (simulator.streams.sm_share.SmShare.compute_run);
# False times each op with its own, as before (tests/differential/test_oplevel_paths.py compares the two).
BATCH_COMPUTE = True


def _stream(env, ops, indices, costs, transfer, done_at, signals, start_s, timing, gpu=None, sms=None, quiet=None):
    clock = env.now  # this stream's own time; >= env.now
    batch = BATCH_COMPUTE and sms is not None and gpu is None
    # NOTE: the per-op tables as locals: an attribute load per op and table costs more than the lookup
    sync_before, waits, issue_offset_s, op_compute_s = (
        costs.sync_before,
        costs.waits,
        costs.issue_offset_s,
        costs.compute_s,
    )
    intervals, count = timing.intervals, len(indices)
    position = 0
    while position < count:
        index = indices[position]
        position += 1
        op = ops[index]
        kind = op.kind
        sync = sync_before[index]
        for other in waits[index]:
            if done_at[other] is None:  # not finished yet: let time pass, then wait for it
                if clock > env.now:
                    yield env.timeout(clock - env.now)
                if done_at[other] is None:
                    if quiet is not None:
                        quiet.block(other)
                    signal = signals.get(other)
                    if signal is None:
                        signal = signals[other] = env.event()
                    yield signal
                # it ended while this stream waited, maybe with its end ahead (max() as a comparison)
                clock = env.now
                if done_at[other] > clock:  # noqa: PLR1730
                    clock = done_at[other]
            elif done_at[other] > clock:
                clock = done_at[other]
        issued = (done_at[sync] if sync >= 0 else start_s) + issue_offset_s[index]
        if issued > clock:  # noqa: PLR1730 (max(), as a comparison: the same first greatest float)
            clock = issued
        if quiet is not None and quiet.alone(kind, index):  # NOTE: no one can interrupt it: lay out what it can
            position, clock = _run_alone(ops, indices, position - 1, clock, costs, done_at, signals, start_s, timing,
                                         quiet, sms is not None)  # fmt: skip
            signal = signals.pop(indices[position - 1], None)
            if signal is not None:
                if clock > env.now:
                    yield env.timeout(clock - env.now)
                signal.succeed()
                quiet.wake(indices[position - 1])
            continue
        takes_turn = gpu is not None and kind != COLLECTIVE and kind != HOST_SYNC
        shares = sms is not None and kind != HOST_SYNC  # compute (or a kernel holding SMs) beside comm
        if kind == COLLECTIVE or kind == FUSED or takes_turn or shares:  # time must really pass
            if clock > env.now:
                yield env.timeout(clock - env.now)
            turn = gpu.request() if takes_turn else None
            if turn is not None and turn is not GRANTED:
                yield turn
            begin = env.now
            tail_s = 0.0  # time after the op's last event that no one else needs to see pass
            if kind == COLLECTIVE:
                held = costs.comm_sms[index] if sms is not None else 0
                if held:
                    sms.hold(held)
                if costs.latency_s[index]:
                    yield env.timeout(costs.latency_s[index])
                done = transfer(index, costs.wire_bytes[index])
                if type(done) is tuple:  # NVLink and NIC halves (both): resume once the later is processed
                    yield done[0]
                    yield done[1]
                else:
                    yield done
                if held:
                    sms.release(held)
            elif kind == FUSED:
                compute_s = op_compute_s[index]
                comm = transfer(index, costs.wire_bytes[index])
                if type(comm) is tuple:
                    comm = _joined(env, *comm)
                comm_end = []
                comm.callbacks.append(lambda _e, ends=comm_end: ends.append(env.now))
                if sms is not None:
                    yield from sms.compute(compute_s)
                    compute_s = timing.slowed_gemm_s[index] = env.now - begin  # on the SMs it had
                else:
                    yield env.timeout(compute_s)
                if not comm_end:  # NOTE: two plain yields instead of an AllOf condition: same times, cheaper
                    yield comm
                comm_s = comm_end[0] - begin
                tail_s = fused_tail_s(compute_s, comm_s, op.tiles) + costs.latency_s[index]
                if turn is not None:  # the GPU turn is held through the tail
                    yield env.timeout(tail_s)
                    tail_s = 0.0
            elif batch:  # this compute op and the plain compute ops after it that need no one: one timeout
                run, kernels = _compute_run(ops, indices, position - 1, costs, done_at, start_s, env.now)
                begins, ends = yield from sms.compute_run(kernels)
                last = len(run) - 1
                for k in range(last):
                    other, end = run[k], ends[k]
                    intervals.append((other, begins[k] - start_s, end - start_s))
                    done_at[other] = end
                position += last
                index, begin = run[last], begins[last]
            elif sms is not None:
                yield from sms.compute(op_compute_s[index])
            else:
                yield env.timeout(op_compute_s[index])
            if turn is not None:
                gpu.release()
            clock = env.now + tail_s
        else:
            begin = clock
            clock += op_compute_s[index]
        intervals.append((index, begin - start_s, clock - start_s))
        done_at[index] = clock
        # NOTE: a stream that waits for this op later finds it in done_at (its end, maybe still ahead of now)
        signal = signals.pop(index, None)
        if signal is not None:
            if clock > env.now:
                yield env.timeout(clock - env.now)
            signal.succeed()
            if quiet is not None:
                quiet.wake(index)
    if quiet is not None:
        quiet.running -= 1  # done: it starts nothing more
    if clock > env.now:
        yield env.timeout(clock - env.now)


def _compute_run(ops, indices, position, costs, done_at, start_s, now) -> tuple[list, list]:
    """The ops and their kernels (ready time, idle-GPU work s): the op at ``position`` of a stream (ready now)
    and the plain compute ops after it that start once the one before ends, each not before the host has issued
    it and its other-stream dependencies are done: up to the first op another stream (or the host) waits for."""
    compute_s, signalled, waits = costs.compute_s, costs.signalled, costs.waits
    sync_before, issue_offset_s = costs.sync_before, costs.issue_offset_s
    index = indices[position]
    run, kernels = [index], [(now, compute_s[index])]
    last = len(indices) - 1
    # NOTE: locals and comparisons, not max([issued, *ready]): the same first greatest float, no lists per op
    while index not in signalled and position < last:  # one may come to wait for it
        position += 1
        index = indices[position]
        kind = ops[index].kind
        if kind == COLLECTIVE or kind == FUSED or kind == HOST_SYNC:
            break
        ready, waiting = None, False
        for other in waits[index]:
            end = done_at[other]
            if end is None:  # it waits for an op not done yet: the stream yields there
                waiting = True
                break
            if ready is None or end > ready:
                ready = end
        if waiting:
            break
        sync = sync_before[index]
        issued = (done_at[sync] if sync >= 0 else start_s) + issue_offset_s[index]
        if ready is not None and ready > issued:
            issued = ready
        run.append(index)
        kernels.append((issued, compute_s[index]))
    return run, kernels
