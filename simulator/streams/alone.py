"""A task's timing, and its ops laid out as arithmetic where nothing else can reach them.

``TaskTiming`` is what one run of a task's ops took. ``run_alone`` lays a stream's ops out with the GPU (and,
on a link of its own, the link) to themselves; ``Quiet`` says when a stream of a multi-stream task may do so
(simulator/streams/tasks.py, the event path) and ``ends_at`` ends a task laid out at its start with one timeout.
simulator/streams/closed_task.py builds on them too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy

from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import _COLLECTIVE, OpCosts
from simulator.streams.task_summary import EXPOSED, FUSED_OP, Tally, close
from workloads.ops import COLLECTIVE, FUSED


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
    # when the host had issued the task's last op, from the task's start, in a task with a host sync (0.0 without
    # one: OpCosts.host_free_s; simulator/engine/host_lead.py)
    host_free_s: float = 0.0


def ends_at(env: simpy.Environment, end_s: float, ops, costs: OpCosts, timing: TaskTiming, tally: Tally):
    """A task laid out now, at its start, ends at ``end_s``: one timeout, which fills in its summary when it
    fires (as a task's processes do when they end: before whoever waits for it resumes)."""
    start_s = env.now
    finished = env.timeout(end_s - start_s)
    finished.callbacks.append(lambda _e: close(ops, costs, timing, tally, start_s, env.now))
    return finished


def run_alone(ops, indices, position, clock, costs, done_at, stops, start_s, timing, quiet, record_gemm, tally=None):
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


class Quiet:
    """Which stream of a task may act now: while every other stream waits for a signal from the one that runs,
    nothing can hold SMs or ask for the GPU's turn beside its compute, so it lays that out as arithmetic and
    lets time pass only where it signals another stream. On a link of its own (``own_link``: no one else's
    flows) nothing can share its collectives' and fused ops' link either, so it times those too
    (run_alone); otherwise (the NIC beside PP and DP traffic, the unfolded placement's
    flows) they take the event path."""

    __slots__ = ("links", "network", "nic_bytes", "own_link", "rate_Bps", "running", "steps", "waiters")

    def __init__(self, streams: int, network: FluidNetwork, links: tuple, own_link: bool, nic_bytes=()) -> None:
        self.running = streams  # streams not waiting for a signal (a stream not started yet counts)
        self.waiters: dict[int, int] = {}  # op -> streams waiting for its signal
        self.network, self.links, self.own_link = network, links, own_link
        self.nic_bytes = nic_bytes  # per op, bytes it moves over the NIC too (empty: none)
        self.rate_Bps = min(map(network.capacities_Bps.__getitem__, links)) if own_link and links else 0.0
        self.steps: tuple | None = None  # run_alone's OpCosts.alone_steps, once it has asked

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
