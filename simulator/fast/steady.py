"""The steady-state shortcut: a step's cost independent of its number of micro-batches.

``run_step`` simulates a step of m micro-batches as a shorter step of m_a micro-batches (m_a congruent to m
modulo the schedule's period q, or 2 q for short periods, and doubled until it fits, or first lengthened by the
periods a run that did not lock says it was short of; simulator/fast/periodic.py); where no bounded pair is cheaper
than the step (below), also a run of up to half the step's count, for its ledger alone.
When the run at m_a's state repeats (every stage's tasks shifted by exactly one period over a window after the
DP parameter gather), the run at m_a + q is the run at m_a with one period inserted, and the step at m is it with
(m - m_a) / q periods inserted: every additive field of the EngineResult grows by what the run at m_a
accumulates over one period of that window (its ledger, simulator/fast/ledger.py: the first period whose next
period adds the same, field by field) and every last instant (the step time, each stage's pipeline-end and
end) by the period's shift lambda: each stage's busy, PP-wait, DP-exposed and compute-busy time, exposed
communication per group, model FLOPs, bytes per link, and each phase's task count and summed duration (the
schedule bubble's means). Memory and the report's ratios come from these and the real workload, as for a
full run. Where no period of the ledger repeats, the step also runs at m_a + q and every field is taken on
the line through the two runs, if that run ends exactly one period later (the reference path, ``ONE_RUN``
False: tests/differential/test_steady.py compares the two). Where no state repeats within the budget (the shorter runs
together cost less than the step, and at most simulator/fast/bounded.EXACT_BUDGET times the bounded path's runs),
the step is taken on the line through two full runs within a stated bound (``shortcut``; simulator/fast/bounded.py),
and where that would not be cheaper either, the full step runs.

The shortcut applies to the folded placement with ``memoize`` on (memoized tasks, or where tasks use the NIC
op-level ones: the lock check is what makes that exact), with no probe that needs every task (traces, link
statistics). It is a step runner around the engine: its runs are plain engines, told to a ledger probe
(simulator/fast/ledger.py), and it returns a plain ``Step``: the result and the counts it ran. Faults fold into per-stage factors that are
the same in every micro-batch (simulator/engine/faults.py stage_faults), so a faulty step repeats like a healthy one
and takes the shortcut too. Everything else runs the full step: the unfolded placement, ``memoize=False`` (the
op-level differential check), probes, and steps too short to gain.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from simulator.costs.calibration import Calibration
from simulator.engine.engine import Engine
from simulator.engine.faults import Faults
from simulator.engine.probes import Probe, subscribed, unobserved
from simulator.engine.result import EngineResult, StageLog
from simulator.fast.bounded import BOUND_REL, EXACT_BUDGET
from simulator.fast.bounded import counts as bounded_counts
from simulator.fast.ledger import Ledger
from simulator.fast.periodic import (
    BYTES,
    COUNT,
    FLOPS,
    LOCK_REL,
    TIME,
    Fields,
    candidates,
    extrapolate,
    index_step,
    lock_window,
    periods_short,
    shift_s,
    shifted,
    valid_count,
)
from simulator.fast.run_line import BOUND_REL as LINE_BOUND_REL
from simulator.fast.run_line import line_fields
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.schedules.base import Schedule

# The steady shortcut extrapolates from the shorter run's ledger alone where it can (periodic state, field by
# field); False runs the step one period longer too and takes the line through the two (the reference). One of the
# speed switches listed in simulator/fast/__init__.py.
ONE_RUN = True
STAGE_TIMES = ("busy_s", "pipeline_end_s", "end_s", "pp_wait_s", "dp_exposed_s", "compute_busy_s")


class ShortRuns:
    """The shortcut's short runs with their ledgers, by what they simulate (the resized workload, cluster,
    calibration and faults), for steps that differ only in their number of micro-batches: two global batches of
    one job try the same short counts (simulator/fast/periodic.candidates depends on the count modulo the period),
    and the run at a count is the same engine run whichever step tries it. Kept by the caller for as long as it
    shares (experiments/common/shared_sims.sharing); a fresh one shares nothing."""

    def __init__(self) -> None:
        self._runs: dict[tuple, tuple[EngineResult, Ledger]] = {}

    def run(
        self,
        workload: StepWorkload,
        cluster: ClusterSpec,
        calibration: Calibration,
        timings: dict,
        faults: Faults | None,
    ) -> tuple[EngineResult, Ledger]:
        """The run of ``workload`` told to a ledger, made once per key (a ConfigError is raised, not kept)."""
        key = (workload, cluster, calibration, faults)
        if key not in self._runs:
            self._runs[key] = ledgered_run(workload, cluster, calibration, timings, faults)
        return self._runs[key]

    def __len__(self) -> int:
        return len(self._runs)


def ledgered_run(
    workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration, timings: dict, faults: Faults | None
) -> tuple[EngineResult, Ledger]:
    """One engine run of ``workload`` told to a ledger probe (simulator/fast/ledger.py)."""
    ledger = Ledger()
    return Engine(workload, cluster, calibration, timings=timings, faults=faults, probes=[ledger]).run(), ledger


@dataclass(frozen=True)
class Step:
    """One step's result, the micro-batch counts simulated to get it (empty: the step ran in full), and the bound
    on its error against the full run (0: exact; simulator/fast/bounded.py BOUND_REL where it is on that line)."""

    result: EngineResult
    runs: tuple[int, ...] = ()
    bound_rel: float = 0.0


def run_step(
    workload: StepWorkload,
    cluster: ClusterSpec,
    calibration: Calibration,
    *,
    placement: str = "folded",
    memoize: bool = True,
    faults: Faults | None = None,
    probes: Iterable[Probe] = (),
    short_runs: ShortRuns | None = None,
) -> Step:
    """One step: extrapolated from shorter steps where their state repeats, else run; ``short_runs``: the
    shortcut's short runs to share with other steps (``ShortRuns``)."""
    probes = tuple(probes)
    watching = subscribed(probes)
    if shortcut_applies(placement, memoize, watching):
        with unobserved():
            result = shortcut(workload, cluster, calibration, faults=faults, short_runs=short_runs)
        if result is not None:
            for probe in watching:
                probe.on_run(result.result)
            return result
    return Step(
        Engine(workload, cluster, calibration, placement=placement, memoize=memoize, faults=faults, probes=probes).run()
    )


def shortcut_applies(placement: str, memoize: bool, probes: tuple[Probe, ...]) -> bool:
    """Whether a step may be extrapolated from shorter ones (see the module docstring)."""
    return placement == "folded" and memoize and not any(p.needs_full_run for p in probes)


def shortcut(
    workload: StepWorkload,
    cluster: ClusterSpec,
    calibration: Calibration,
    *,
    faults: Faults | None = None,
    short_runs: ShortRuns | None = None,
) -> Step | None:
    """The step from shorter runs: exact where a state repeats within EXACT_BUDGET times the bounded path's cost
    (``extrapolated``); else, where a bounded plan is cheaper than the step, along the steady periods of a run whose
    stages keep one pace (simulator/fast/run_line.py: a failed exact attempt's, else the two-run line's longer run,
    made first), or on the line through two full runs (simulator/fast/bounded.py), reusing a failed exact attempt's
    run where it fits, each within its bound; None where none is cheaper than the full step."""
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    timings: dict = {}
    ran: dict[int, EngineResult] = {}
    ledgers: dict[int, Ledger] = {}
    plan = bounded_counts(workload.schedule)
    cap = int(EXACT_BUDGET * sum(plan)) if plan is not None else None
    exact = extrapolated(
        workload,
        cluster,
        calibration,
        faults=faults,
        cap=cap,
        timings=timings,
        ran=ran,
        ledgers=ledgers,
        short_runs=short_runs,
    )
    if exact is not None or plan is None:
        return exact
    line = along_one_run(workload, ran, ledgers, ledgers, wall_start, cpu_start)
    if line is not None:
        return line
    m_a, m_b = bounded_counts(workload.schedule, ran)
    if sum(ran) + sum(count for count in {m_a, m_b} if count not in ran) >= workload.micro_batches:
        return None  # with the exact path's runs, no cheaper than the full step
    try:
        if m_b not in ran:  # the longer run first, told to a ledger: the line along its periods saves the shorter
            ran[m_b], ledgers[m_b] = ledgered_run(
                resized_workload(workload, m_b), cluster, calibration, timings, faults
            )
            line = along_one_run(workload, ran, ledgers, (m_b,), wall_start, cpu_start)
            if line is not None:
                return line
        if m_a not in ran:
            ran[m_a] = Engine(
                resized_workload(workload, m_a), cluster, calibration, timings=timings, faults=faults
            ).run()
    except ConfigError:
        return None
    fields = extrapolate(fields_of(ran[m_a]), fields_of(ran[m_b]), m_a, m_b, workload.micro_batches)
    ops = sum(result.simulated_ops for result in ran.values())
    return Step(result_of(fields, workload, ops, wall_start, cpu_start), (m_a, m_b), BOUND_REL)


def along_one_run(
    workload: StepWorkload,
    ran: dict[int, EngineResult],
    ledgers: dict[int, Ledger],
    counts: Iterable[int],
    wall_start: float,
    cpu_start: float,
) -> Step | None:
    """The step along the steady periods of the longest run of ``counts`` (each in ``ran``, told to ``ledgers``) whose
    stages keep one pace (simulator/fast/run_line.py), or None."""
    for m_a in sorted(counts, reverse=True):
        gathered_s = max(log.params_gathered_s for log in ran[m_a].stages)
        fields = line_fields(workload, fields_of(ran[m_a]), ledgers[m_a], m_a, gathered_s)
        if fields is not None:
            ops = sum(result.simulated_ops for result in ran.values())
            return Step(result_of(fields, workload, ops, wall_start, cpu_start), (m_a,), LINE_BOUND_REL)
    return None


def extrapolated(
    workload: StepWorkload,
    cluster: ClusterSpec,
    calibration: Calibration,
    *,
    one_run: bool | None = None,
    faults: Faults | None = None,
    cap: int | None = None,
    timings: dict | None = None,
    ran: dict[int, EngineResult] | None = None,
    ledgers: dict[int, Ledger] | None = None,
    short_runs: ShortRuns | None = None,
) -> Step | None:
    """The step's result from a shorter run whose state repeats (``one_run``, default ONE_RUN: from its ledger
    alone where it repeats field by field, else from it and a run one period longer), or None if none was
    found in budget (and within ``cap`` micro-batches simulated, if given). Each run whose state did not repeat
    goes into ``ran`` by its count, its ledger into ``ledgers``; ``timings``: the task timings to share;
    ``short_runs``: short runs made before for another step of the same job (``ShortRuns``; a run taken from it counts
    as made here)."""
    one_run = ONE_RUN if one_run is None else one_run
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    timings = {} if timings is None else timings  # task timings do not depend on the micro-batch count: time each once
    ops = spent = 0
    longer: dict[int, int] = {}  # per run that did not lock, the count it predicts would (candidates)
    # With no bounded path to fall back on (``cap`` None: simulator/fast/bounded.counts found no pair cheaper than the
    # step), the fallback is the full step: a run of at most half the step whose ledger repeats still pays, even
    # where the run one period longer would not fit beside it (DeepSeek-V3's interleaved 1F1B at 128 micro-batches
    # locks at 64: 0.9 CPU s against 1.5 for the step in full); that second run is then not made.
    lone = one_run and cap is None
    for m_a, q, shift in candidates(workload.schedule, longer, one_run=lone):
        if cap is not None and spent + m_a > cap:
            return None
        alone = spent + 2 * m_a + q >= workload.micro_batches  # admitted for its lone run only (candidates)
        spent += m_a
        short = (resized_workload(workload, m_a), cluster, calibration, timings, faults)
        try:
            first, ledger = ledgered_run(*short) if short_runs is None else short_runs.run(*short)
        except ConfigError:
            return None
        ops += first.simulated_ops
        if ran is not None:
            ran[m_a] = first
        if ledgers is not None:
            ledgers[m_a] = ledger
        records = [log.tasks for log in first.stages]
        gathered = max(log.params_gathered_s for log in first.stages)
        for period, index_shift in state_periods(workload.schedule, m_a, q, shift):
            lam_s = shift_s(records, index_shift)
            window = lock_window(records, index_shift, lam_s, gathered, ledger.longest_send_s)
            if window is None:
                short = periods_short(records, index_shift, lam_s, gathered, ledger.longest_send_s)
                if short is not None:
                    longer[m_a] = min(longer.get(m_a, workload.micro_batches), m_a + short * period)
                continue
            periods = (workload.micro_batches - m_a) // period
            increment = period_increment(first, ledger, index_shift, lam_s, window) if one_run else None
            if increment is not None:
                fields = extended(fields_of(first), increment, periods)
                return Step(result_of(fields, workload, ops, wall_start, cpu_start), (m_a,))
            if alone:
                continue  # its ledger did not repeat, and its run one period longer would cost the step
            longer_workload = resized_workload(workload, m_a + period)
            second = Engine(longer_workload, cluster, calibration, timings=timings, faults=faults).run()
            ops += second.simulated_ops
            if abs(second.step_time_s - first.step_time_s - lam_s) > LOCK_REL * second.step_time_s:
                return None  # the longer run is not the shorter with one period inserted: run the step
            fields = extrapolate(fields_of(first), fields_of(second), m_a, m_a + period, workload.micro_batches)
            return Step(result_of(fields, workload, ops, wall_start, cpu_start), (m_a, m_a + period))
    return None


def period_increment(
    first: EngineResult, ledger: Ledger, index_shift: int, lam_s: float, window: tuple[float, float]
) -> Fields | None:
    """What one period adds to every additive field of ``first``, whose state repeats over ``window`` with shift
    ``lam_s``: its ledger's increments from the end of a stage-0 task that begins in the window to its twin's
    end, the first such period whose next period's increments equal its own (None if none does; a task that
    ends in the first period may carry a wait that began before the window); the last-instant fields (step,
    pipeline-end and end times) move by lambda."""
    tol_s = LOCK_REL * first.step_time_s
    totals = fields_of(first)
    for task, begin_s, _ in first.stages[0].tasks:
        if begin_s < window[0] - tol_s:
            continue
        twin = shifted(task, index_shift)
        if begin_s >= window[1] or shifted(twin, index_shift) not in ledger.marks:
            return None
        increment = ledger.between(task, twin)
        if same_increments(increment, ledger.between(twin, shifted(twin, index_shift)), totals, tol_s):
            increment[(TIME, "step")] = lam_s
            for stage in range(len(first.stages)):
                increment[(TIME, stage, "pipeline_end_s")] = increment[(TIME, stage, "end_s")] = lam_s
            return increment
    return None


def same_increments(one: Fields, two: Fields, totals: Fields, tol_s: float) -> bool:
    """Whether two periods' increments are equal: times to ``tol_s`` (the lock's), counts exactly, bytes and
    FLOPs to LOCK_REL of the run's totals (what a difference of two running sums can lose)."""
    if one.keys() != two.keys():
        return False
    for name, value in one.items():
        unit = name[0]
        floor = tol_s if unit == TIME else 0.0 if unit == COUNT else LOCK_REL * abs(totals.get(name, 0.0))
        if abs(value - two[name]) > floor:
            return False
    return True


def extended(fields: Fields, increment: Fields, periods: int) -> Fields:
    """Every field with ``periods`` periods of ``increment`` added (missing: 0)."""
    return {name: fields.get(name, 0.0) + increment.get(name, 0.0) * periods for name in {**fields, **increment}}


def state_periods(schedule: Schedule, m_a: int, q: int, shift: int) -> Iterator[tuple[int, int]]:
    """(period, index shift) the run at m_a's state may repeat with: the schedule's period q, then 2 q (a
    DualPipeV steady state alternates two timings; periodic.candidates keeps m_a congruent to m modulo 2 q
    for short periods) where m - m_a is whole periods of 2 q and the longer run stays within the budget
    (shorter than the step)."""
    yield q, shift
    m = schedule.micro_batches
    if (m - m_a) % (2 * q) == 0 and 2 * m_a + 2 * q < m and valid_count(schedule, m_a + 2 * q):
        yield 2 * q, index_step(schedule, m_a, 2 * q)


def resized_workload(workload: StepWorkload, micro_batches: int) -> StepWorkload:
    """The same step (layout as fitted, op lists shared) over ``micro_batches`` micro-batches per pipeline."""
    global_batch = micro_batches * workload.dp * workload.layout.micro_batch
    return replace(workload, global_batch=global_batch)


def fields_of(result: EngineResult) -> Fields:
    """The additive fields of a result, keyed (unit, name...)."""
    fields: Fields = {(TIME, "step"): result.step_time_s}
    for stage, log in enumerate(result.stages):
        for name in STAGE_TIMES:
            fields[(TIME, stage, name)] = getattr(log, name)
        fields[(FLOPS, stage)] = log.model_flops
        for group, seconds in log.exposed_comm_s.items():
            fields[(TIME, stage, "exposed", group)] = seconds
    for link, nbytes in result.network_bytes.items():
        fields[(BYTES, link)] = nbytes
    for phase, (total, count) in result.phase_spans.items():
        fields[(TIME, "phase", phase)] = total
        fields[(COUNT, phase)] = count
    return fields


def result_of(fields: Fields, workload: StepWorkload, ops: int, wall_start: float, cpu_start: float) -> EngineResult:
    """An EngineResult from extrapolated fields (stage logs without task records); wall and CPU time since the
    given starts."""
    stages = []
    for stage in range(workload.pp):
        log = StageLog(**{name: fields[(TIME, stage, name)] for name in STAGE_TIMES})
        log.model_flops = fields[(FLOPS, stage)]
        log.exposed_comm_s = {name[3]: value for name, value in fields.items() if name[:3] == (TIME, stage, "exposed")}
        stages.append(log)
    links = {name[1]: value for name, value in fields.items() if name[0] == BYTES}
    phases = {
        name[1]: (fields[(TIME, "phase", name[1])], round(value)) for name, value in fields.items() if name[0] == COUNT
    }
    wall_s, cpu_s = time.perf_counter() - wall_start, time.process_time() - cpu_start
    return EngineResult(fields[(TIME, "step")], stages, ops, wall_s, links, phases, workload, cpu_s)
