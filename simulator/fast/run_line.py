"""The bounded steady shortcut from one run: a step extrapolated along the steady periods of a run whose state did not
repeat exactly, within a stated bound.

Where the steady shortcut's exact attempt fails (simulator/fast/steady.py), the run it made still holds whole steady
periods (and where it does not, the two-run line's longer run is made first, with a ledger, for the same line): its
order is the order at the schedule's shortest count (``bounded.shortest``) with k whole periods inserted just before
the point where the order one period longer inserts the next (``Schedule.lazy_order`` at m_a and m_a + q: the first
task where the two differ), less those begun before the DP parameter gather ended and the warm-up transient's, as the
Marginal Standard Error Rule finds them in each stage's period lengths (``mser_truncation``: a stage's first periods
after the gather can still run slower, as interleaved 1F1B's do beside the gather's tail).
Each stage's tasks over those k periods, read from the run's ledger (simulator/fast/ledger.py), give that stage's
increments per period (busy, PP-wait, DP-exposed and compute-busy time, FLOPs, exposed communication per group, each
phase's summed span and count, the bytes over its own links) and its pace: the time its k periods took, over k. The
step at m is the run with (m - m_a) / q more periods: every additive field grows by its increment per period, and
every last instant (the step, each stage's pipeline end and end) by the slowest stage's pace, as a pipeline's stages
end up in one rhythm; a faster stage's PP-wait takes the difference.

The line holds only where the stages already keep one pace: a stage that runs faster than another is still spending
a slack that will run out (ZB1P on DeepSeek-V3's 2,048 H800s: at stage-0 micro-batch 146), which no run shorter than
that shows, so where the stages' paces differ by more than ``PACE_REL`` of the slowest (or fewer than
``MIN_PERIODS`` periods were run) the two-run line of simulator/fast/bounded.py is taken instead.

``BOUND_REL``: each time within it of the step time, each phase's summed span, bytes per link and FLOPs within it of
their own value (counts are exact), as simulator/fast/bounded.relative_error measures against the full run.
"""

from __future__ import annotations

from itertools import pairwise

from simulator.fast.bounded import shortest
from simulator.fast.ledger import Ledger, stage_of
from simulator.fast.periodic import BYTES, COUNT, FLOPS, TIME, Fields, period
from workloads.graph.step import StepWorkload

# The bound (see the module docstring): twice the worst error measured against full runs (experiments/beyond/
# steady_bound.py, issue 38), DeepSeek-V3 on 2,048 H800s at 128 to 1,024 micro-batches, each from its exact attempt's
# run: DualPipeV 1.77e-2 at 1,024 (stage 14's exposed EP; its step 9.5e-3; from 54), DualPipe 1.68e-2 (stage 5's;
# step 2.3e-3; from 56), DualPipeV + EP overlap 6.1e-3, DualPipe + EP overlap 4.3e-3 (ZB1P's stages do not keep one
# pace: two runs); the 4-layer model with cross-node EP at PP 2 and 4, 64 to 256: 8.2e-3 at most (DualPipe + EP
# overlap at PP 4 from 28; ZB1P 5.9e-3, DualPipeV + EP overlap 4.6e-3).
BOUND_MEASURED_REL = 0.0177
BOUND_REL = 2 * BOUND_MEASURED_REL
# The step time's own bound, which is all a lower bound on the step needs (simulator/report/bounds.py): twice the
# worst step error of the same measurements, the 4-layer model's 1F1B at PP 4 and 96 micro-batches from the two-run
# path's longer run of 32 (1.18e-2; DeepSeek-V3's DualPipeV 9.54e-3 at 1,024).
STEP_MEASURED_REL = 0.0118
STEP_BOUND_REL = 2 * STEP_MEASURED_REL
# The stages keep one pace where their paces over the run's steady periods differ by at most this much of the slowest
# one's: measured 2.9e-3 to 5.9e-3 in DeepSeek-V3's DualPipe family (the EP exchanges meeting the PP sends at a phase
# that drifts), 6.0e-2 and 1.1e-1 in its ZB1P runs of 44 and 22 micro-batches (a slack still being spent), whose
# line from one run was 3.7e-2 to 5.5e-2 off (stage 0's PP-wait) at 128 to 512.
PACE_REL = 0.02
# The fewest steady periods the run must hold for its per-period increments, the drift averaging over them: measured
# from 6 on (DeepSeek-V3's own DualPipe layout at 120 micro-batches from 56, 6 left after MSER: 9.2e-4; the DualPipe
# family at PP 8 from 30-32, 6-7 periods: 9.1e-3 at most at 128 to 1,024, its step 5.2e-3; at PP 16 from 54-56, 10-11
# periods: the bound above).
MIN_PERIODS = 6


def line_fields(
    workload: StepWorkload, run_fields: Fields, ledger: Ledger, m_a: int, gathered_s: float
) -> Fields | None:
    """Every additive field of ``workload``'s step on the line along the steady periods of its run at m_a
    micro-batches (``run_fields``: that run's fields, simulator/fast/steady.fields_of; ``ledger``: what it was told;
    ``gathered_s``: when its DP parameter gather ended, before which no period counts), or None where the line does
    not hold (too few periods, or the stages' paces differ: the module docstring)."""
    schedule = workload.schedule.resized(m_a)
    q = period(schedule)
    if q is None or (workload.micro_batches - m_a) % q:
        return None
    k = (m_a - shortest(schedule)) // q  # the periods inserted into the shortest order
    windows = []  # per stage: its entries, the last before the insertion point, and its tasks per period
    for stage in range(workload.pp):
        cut = schedule.steady_cut(stage)
        if cut is None:
            return None
        entries = [entry for entry in ledger.entries if entry.stage == stage]
        # where the order one period longer first differs (its end, where the period is the stage's last tasks)
        longer = schedule.resized(m_a + q).lazy_order(stage)
        pairs = zip((entry.task for entry in entries), longer)
        inserted = next((i for i, (a, b) in enumerate(pairs) if a != b), len(entries))
        n = sum(cut.per_period.values())
        k = min(k, (inserted - 1) // n)  # whole periods before the insertion point, none before the run's start
        while k > 0 and entries[inserted - k * n].begin_s < gathered_s:  # a period begun before the gather ended
            k -= 1
        windows.append((entries, inserted - 1, n))
    if k < MIN_PERIODS:
        return None
    # the warm-up transient's periods (each stage's, the most of any) left out: MSER
    k -= max((mser_truncation(period_spans_s(entries, last, n, k)) for entries, last, n in windows), default=0)
    if k < MIN_PERIODS:
        return None
    increments: Fields = {}

    def add(name: tuple, value: float) -> None:
        increments[name] = increments.get(name, 0.0) + value / k

    paces_s = []
    for stage, (entries, last, n) in enumerate(windows):
        first = last - k * n
        for entry in entries[first + 1 : last + 1]:
            span_s = entry.end_s - entry.begin_s
            add((TIME, stage, "busy_s"), span_s)
            add((TIME, stage, "pp_wait_s"), entry.pp_wait_s)
            add((TIME, stage, "dp_exposed_s"), entry.dp_wait_s)
            add((TIME, stage, "compute_busy_s"), entry.timing.compute_busy_s)
            add((FLOPS, stage), entry.timing.model_flops)
            for group, seconds in entry.timing.exposed_comm_s.items():
                add((TIME, stage, "exposed", group), seconds)
            add((TIME, "phase", entry.task.direction), span_s)
            add((COUNT, entry.task.direction), 1)
        paces_s.append((entries[last].end_s - entries[first].end_s) / k)
        links, sent = ledger.stage_links(stage), ledger.stage_bytes[stage]
        for link, begin, end in zip(links, sent[first], sent[last]):  # the stage's own links over its own periods
            add((BYTES, link), end - begin)
        if stage == 0:  # links of no stage, over stage 0's periods
            begin, end = ledger.marks[entries[first].task].bytes_sent, ledger.marks[entries[last].task].bytes_sent
            for link, nbytes in end.items():
                if stage_of(link) is None:
                    add((BYTES, link), nbytes - begin.get(link, 0.0))
    pace_s = max(paces_s)
    if pace_s - min(paces_s) > PACE_REL * pace_s:
        return None
    periods = (workload.micro_batches - m_a) // q
    fields = dict(run_fields)
    for name, value in increments.items():
        fields[name] = fields.get(name, 0.0) + value * periods
    fields[(TIME, "step")] += pace_s * periods
    for stage, stage_pace_s in enumerate(paces_s):
        fields[(TIME, stage, "pp_wait_s")] += (pace_s - stage_pace_s) * periods
        fields[(TIME, stage, "pipeline_end_s")] += pace_s * periods
        fields[(TIME, stage, "end_s")] += pace_s * periods
    return fields


def period_spans_s(entries: list, last: int, n: int, k: int) -> list[float]:
    """How long each of the k periods up to entry ``last`` took (``n`` tasks each), from one period's last task's end
    to the next's, earliest first."""
    ends = [entries[last - j * n].end_s for j in range(k, -1, -1)]
    return [after - before for before, after in pairwise(ends)]


def mser_truncation(spans_s: list[float]) -> int:
    """How many leading periods are warm-up by the Marginal Standard Error Rule (White, "An effective truncation
    heuristic for bias reduction in simulation output", Simulation 69(6), 1997): the d (at most half the series)
    that minimizes the squared deviations of the rest from their mean over (k - d) squared."""
    best, best_d = None, 0
    for d in range(len(spans_s) // 2 + 1):
        rest = spans_s[d:]
        mean = sum(rest) / len(rest)
        # products, not ** 2: a step of overflowing spans (a straggler of 1e308) gives inf instead of raising
        statistic = sum((x - mean) * (x - mean) for x in rest) / (len(rest) * len(rest))
        if best is None or statistic < best:
            best, best_d = statistic, d
    return best_d
