"""Op-level execution of one pipeline task on a GPU's streams, in a simpy environment.

``TaskTiming`` lives in simulator/streams/alone.py (re-exported here: every timer reads it from this module)."""

from __future__ import annotations

from collections.abc import Callable

import simpy

from simulator.costs.kernels import fused_tail_s
from simulator.streams.alone import Quiet, TaskTiming, ends_at, run_alone
from simulator.streams.closed_task import closed, solve
from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import OpCosts
from simulator.streams.sm_share import SmShare
from simulator.streams.task_summary import Tally, summarize
from simulator.streams.turns import Turns
from workloads.ops import COLLECTIVE, FUSED, HOST_SYNC, Op


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
    nic_flows: tuple[int, ...] = (),
    joined: Callable[[int], simpy.Event] | None = None,
) -> simpy.Event:
    """Start the task's streams; the returned event fires when every op is done.

    Ops of one stream run in list order; an op starts when it heads its stream, the host has issued it
    and its dependencies are done (CUDA stream semantics). The host issues kernels in program order,
    each costing its launch time, and at a device-to-host sync waits for the GPU to reach it, so the GPU
    then idles until the host catches up. Collectives of a folded group move each member's egress bytes
    over the representative GPU's links: every member does the same at the same time. ``transfer(op
    index, wire bytes)``, if given, replaces that (the unfolded engine moves real per-member flows), and then
    ``joined(op index)`` is the event that fires once every member has reached that op's collective (a barrier).
    Ops with NIC bytes (cross-node EP) also load ``nic_links`` (on ``nic_network``, default ``network``),
    concurrently with their NVLink bytes, as ``nic_flows[index]`` equal flows (one per peer its NIC bytes go to,
    as the unfolded placement moves them: max-min fairness shares a link per flow; default one; a weighted flow
    of the FluidNetwork).
    With ``lanes`` (DualPipe's F&B) each lane has its own streams and the lanes' compute-stream ops take
    turns on the GPU (one at a time, first come first served), so one lane computes while the other
    communicates; collectives and host syncs take no turn (NCCL kernels run beside compute, as
    DeepSeek-V3 Sec. 3.2.2). Whenever more than one stream runs, a collective's kernel holds its SMs
    (``costs.comm_sms``) and the compute beside it runs on the rest (simulator.streams.sm_share).
    Without lanes, where kernels other than collectives run on more than one stream (``costs.shared_gpu``:
    Megatron-Core's combined 1F1B, whose combine node runs the unpermute and residual add on the communication
    stream), those kernels take the same turns, and so does each collective before it starts: launched while a
    compute kernel holds the SMs, a communication kernel starts when that kernel ends, then holds its own SMs
    while the compute after it takes turns on the rest. A Hopper GEMM or attention kernel fills every SM and the
    GPU hands SMs to pending kernels in order, not by preemption; EP overlap needs CUDA_DEVICE_MAX_CONNECTIONS
    > 1 (megatron/core/transformer/moe/README.md, NVIDIA/Megatron-LM@d98e8a64), so launch order does not fix
    the start order across streams: "communication kernel will be pushed to the end of the GEMM kernel, failing
    to overlap the kernels" (NVIDIA-NeMo/Megatron-Bridge@5f02c907 scripts/performance/perf_plugins.py,
    _set_num_cuda_device_max_connections, on Hopper); "GEMM might monopolize SMs and prevent a small NCCL kernel
    from starting" (timmoon10, pytorch/pytorch#143890); the combine node's residual add "would compete for SM
    resources with another microbatch's computation" (megatron/core/models/gpt/fine_grained_callables.py,
    submodule_combine_forward, d98e8a64). Where one op's end releases kernels of both streams at once, the
    stream of the op that ended goes first (its next kernel is already in its queue, the other's waits on an
    event): assumed, a race on the GPU's front end that no source times. Assumed too: a kernel holds all SMs
    from its start to its end (its last wave's tail, where a CUDA kernel of the other stream can already start,
    is not modelled), and a pending communication kernel does not jump the queue: Megatron-LM's high_priority_a2a_comm_stream (#4694,
    2026-05-17) is off by default; Megatron-Bridge sets it only in its full-iteration-graph MXFP8 HybridEP
    recipes (src/megatron/bridge/perf_recipes/qwen/common.py at 067f987d), none of them a run of the corpus.
    A fused GEMM + collective whose compute is done while its collective still waits for a member to join (the
    unfolded engine's barrier, ``joined``; the folded group's members join together) gives its turn back until its
    bytes have landed, and takes a turn again for its tail: holding it, two lanes on GPUs of one group that reach
    their fused ops in different orders would each wait for a turn the other holds (a deadlock the unfolded
    engine met with DualPipe over replicas that differ, issue 42). Assumed: a fused kernel that waits for its
    peers spins on a flag without holding up the other stream's kernels; no source times that wait.

    NOTE: for speed, a stream advances its own clock arithmetically through compute ops and yields to
    simpy only where time must pass for others: before a collective, before waiting on another stream,
    and when an op another stream waits for completes. Compute durations are fixed, so this is exact.
    On a link of its own (the folded stage's NVLink, no NIC bytes, no lanes, no rate observers) a stream
    whose fellow streams all wait for its signals advances through collectives and fused ops the same way
    (Quiet): nothing can share its link or SMs until it signals.
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
        alone, tally = Quiet(1, network, comm_links, True), Tally(costs)
        done_at: list[float | None] = [None] * len(ops)
        _, end_s = run_alone(ops, range(len(ops)), 0, start_s, costs, done_at, {}, start_s, timing, alone, False, tally)
        if costs.has_host_sync:
            timing.host_free_s = costs.host_free_s(done_at, start_s)
        return ends_at(env, end_s, ops, costs, timing, tally)
    # (a task whose kernels take turns, lanes or costs.shared_gpu, takes the event path: the closed layout has none)
    if CLOSED and transfer is None and not lanes and not costs.shared_gpu and closed(network, comm_links, costs):
        # NOTE: no one else's flows, SMs or turns can reach the task: its whole timeline is laid out now, at
        # its start (simulator/streams/closed_task.py), and it costs one simpy event.
        tally = Tally(costs)
        end_s = solve(ops, costs, network, comm_links, timing, start_s, tally)
        return ends_at(env, end_s, ops, costs, timing, tally)
    # The stage's own NVLink network (folded placement): only this task's streams move flows on it (and no probe
    # watches its rates).
    # NOTE: a task with NIC bytes has its NVLink to itself too: only its ops with NIC bytes take the event path
    own_link = transfer is None and not lanes and not network.observers
    if transfer is None:
        nic_bytes, nic_net = costs.nic_bytes if nic_links else (), nic_network or network

        def transfer(index: int, nbytes: float) -> simpy.Event | tuple[simpy.Event, simpy.Event]:
            event = network.transfer(comm_links, nbytes)
            if nic_bytes and nic_bytes[index]:
                flows = nic_flows[index] if nic_flows else 1
                event = both(env, event, nic_net.transfer(nic_links, nic_bytes[index], flows))
            return event

    if timing.intervals is None:  # the event path sums the intervals at the task's end (summarize)
        timing.intervals = []
    done_at: list[float | None] = [None] * len(ops)
    signals: dict[int, simpy.Event] = {}  # ops another stream waits for now: the event it waits on
    admits = costs.shared_gpu and not lanes  # Megatron-Core's combined 1F1B (OpCosts.shared_gpu)
    gpu = Turns(env) if lanes or admits else None
    sms = SmShare(env, costs.sm_count) if costs.comm_sms and len(streams) > 1 else None
    quiet = Quiet(len(streams), network, comm_links, own_link, costs.nic_bytes if nic_links else ()) if QUIET else None
    procs = [
        env.process(
            _stream(
                env, ops, indices, costs, transfer, done_at, signals, start_s, timing, gpu, sms, quiet, admits, joined
            )
        )
        for indices in streams
    ]
    finished = env.all_of(procs)
    finished.callbacks.append(lambda _e: summarize(ops, costs, timing, start_s, env.now, bool(lanes)))
    if costs.has_host_sync:
        finished.callbacks.append(lambda _e: setattr(timing, "host_free_s", costs.host_free_s(done_at, start_s)))
    return finished


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


# A stream of a task on a link of its own times its ops as arithmetic while the others wait for it (Quiet; with NIC
# bytes, its ops without them); False steps every op with events (tests/scenarios/test_quiet_streams.py compares the
# two). One of the speed switches listed in simulator/fast/__init__.py.
QUIET = True

# A task of several streams that shares nothing with the rest of the step is laid out at its start as arithmetic
# (simulator/streams/closed_task.py); False runs its streams as simpy processes (tests/scenarios/test_closed_task.py
# compares the two). One of the speed switches listed in simulator/fast/__init__.py.
CLOSED = True


def _stream(
    env,
    ops,
    indices,
    costs,
    transfer,
    done_at,
    signals,
    start_s,
    timing,
    gpu=None,
    sms=None,
    quiet=None,
    admits=False,
    joined=None,
):
    clock = env.now  # this stream's own time; >= env.now
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
            position, clock = run_alone(ops, indices, position - 1, clock, costs, done_at, signals, start_s, timing,
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
            turn = (gpu.take() if admits else gpu.request()) if takes_turn else None
            if turn is not None:
                yield turn
            elif (
                admits
                and kind == COLLECTIVE
                and (costs.latency_s[index] or costs.wire_bytes[index])
                and (gpu.busy or gpu.waiting)
            ):
                # a communication kernel gets SMs once the compute kernel holding them ends, first come first served
                yield gpu.request()
                gpu.release()
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
                if not comm_end and takes_turn and joined is not None and not joined(index).triggered:
                    gpu.release()  # its peers have not all joined: the turn goes back while it waits (docstring)
                    yield comm
                    turn = gpu.take() if admits else gpu.request()
                    if turn is not None:
                        yield turn
                elif not comm_end:  # NOTE: two plain yields instead of an AllOf condition: same times, cheaper
                    yield comm
                comm_s = comm_end[0] - begin
                tail_s = fused_tail_s(compute_s, comm_s, op.tiles) + costs.latency_s[index]
                if takes_turn:  # the GPU turn is held through the tail
                    yield env.timeout(tail_s)
                    tail_s = 0.0
            elif sms is not None:
                yield from sms.compute(op_compute_s[index])
            else:
                yield env.timeout(op_compute_s[index])
            if takes_turn:
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
