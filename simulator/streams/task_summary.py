"""What a task's op intervals add up to (simulator/streams/tasks.py): compute-busy time and exposed communication per group.

An op's interval counts by its tally: compute (and a fused op's GEMM) is busy; a fused op's time beyond its GEMM
and a collective on the compute stream are exposed; a collective off the compute stream (or, with F&B lanes,
any collective) is exposed for the part of it no busy interval hides. ``summarize`` tallies the recorded
intervals at a task's end; a task laid out as arithmetic tallies its ops as it lays them out (``Tally``)
and ``close`` finishes both the same way.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from workloads.ops import COLLECTIVE, COMPUTE, FUSED

BUSY, FUSED_OP, EXPOSED, OVERLAPPED = range(
    4
)  # an op's tally (BUSY is 0: simulator.streams.alone.run_alone tests it so)


def tally_of(kind: str, stream: str) -> int:
    """How an op of ``kind`` on ``stream`` counts (lanes aside: there every collective is OVERLAPPED)."""
    if kind == FUSED:
        return FUSED_OP
    if kind == COLLECTIVE:
        return EXPOSED if stream == COMPUTE else OVERLAPPED
    return BUSY


class Tally:
    """Sums so far: busy seconds, exposed seconds per group, the collectives to check against the busy intervals
    (kept, in ``busy``, only where there is such a collective: ``hides``)."""

    __slots__ = ("busy", "busy_s", "exposed", "hides", "overlapped")

    def __init__(self, costs, lanes: bool = False) -> None:
        self.hides = lanes or costs.overlapped
        self.busy: list[tuple[float, float]] | None = [] if self.hides else None
        self.busy_s = 0
        self.exposed: dict = {}
        self.overlapped: list[tuple[int, float, float]] = []

    def add(self, index: int, begin: float, end: float, tally: int, group, gemm_s: float) -> None:
        """One op's interval (``gemm_s``: a fused op's GEMM time)."""
        if tally == BUSY:
            self.busy_s += end - begin
            if self.busy is not None:
                self.busy.append((begin, end))
        elif tally == FUSED_OP:
            gemm_end = begin + gemm_s
            self.busy_s += gemm_end - begin
            if self.busy is not None:
                self.busy.append((begin, gemm_end))
            self.exposed[group] = self.exposed.get(group, 0.0) + (end - begin) - gemm_s
        elif tally == EXPOSED:
            self.exposed[group] = self.exposed.get(group, 0.0) + (end - begin)
        else:
            self.overlapped.append((index, begin, end))


def summarize(ops, costs, timing, start_s: float, end_s: float, lanes: bool = False) -> None:
    """Tally the intervals ``timing`` recorded (from the task's start), then ``close``. With lanes a
    compute-stream collective may hide behind the other lane's compute."""
    tally = Tally(costs, lanes)
    kinds, groups, _ = costs.tallies
    busy, exposed, overlapped = tally.busy, tally.exposed, tally.overlapped
    busy_s, slowed, compute_s = 0, timing.slowed_gemm_s, costs.compute_s
    for interval in timing.intervals:  # NOTE: Tally.add inlined: one pass, no call per op
        index, begin, end = interval
        kind = kinds[index]
        if kind == BUSY:
            busy_s += end - begin
            if busy is not None:
                busy.append((begin, end))
        elif kind == FUSED_OP:
            gemm_s = slowed.get(index, compute_s[index])
            gemm_end = begin + gemm_s
            busy_s += gemm_end - begin
            if busy is not None:
                busy.append((begin, gemm_end))
            group = groups[index]
            exposed[group] = exposed.get(group, 0.0) + (end - begin) - gemm_s
        elif kind == EXPOSED and not lanes:
            group = groups[index]
            exposed[group] = exposed.get(group, 0.0) + (end - begin)
        else:
            overlapped.append(interval)
    tally.busy_s = busy_s
    close(ops, costs, timing, tally, start_s, end_s)


def close(ops, costs, timing, tally: Tally, start_s: float, end_s: float) -> None:
    """Fill in the task's span, FLOPs (every op ran once: the op list's total), busy time and exposed time, each
    overlapped collective less the busy time beside it."""
    timing.duration_s = end_s - start_s
    timing.model_flops += costs.total_flops
    timing.compute_busy_s = tally.busy_s
    exposed, overlapped = tally.exposed, tally.overlapped
    if overlapped:
        busy = tally.busy
        busy.sort()
        starts = [b_begin for b_begin, _ in busy]
    for index, begin, end in overlapped:
        hidden = 0.0
        # Busy intervals of one stream do not overlap, so only those starting before ``end`` and at most one
        # starting before ``begin`` can intersect [begin, end).
        for b_begin, b_end in busy[max(bisect_right(starts, begin) - 1, 0) : bisect_left(starts, end)]:
            # NOTE: max(0.0, min(end, b_end) - max(begin, b_begin)) as comparisons (no builtin calls per interval)
            overlap = (end if end <= b_end else b_end) - (begin if begin >= b_begin else b_begin)  # noqa: FURB136
            if overlap > 0.0:
                hidden += overlap
        group = ops[index].group
        exposed[group] = exposed.get(group, 0.0) + max(0.0, (end - begin) - hidden)
    timing.exposed_comm_s = exposed
