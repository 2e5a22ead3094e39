"""The steady-state shortcut: a step's cost independent of its number of micro-batches.

``run_step`` simulates a step of m micro-batches as two shorter steps of m_a and m_a + q micro-batches (q the
schedule's period, m_a congruent to m modulo q and doubled until it fits; simulator/periodic.py). When the
run at m_a's state repeats (every stage's tasks shifted by exactly one period over a window after the DP
parameter gather) and the run at m_a + q ends exactly one period later, the step at m is the step at m_a with
(m - m_a) / q periods inserted, and every additive field of the EngineResult is extrapolated on the line:
the step time, each stage's busy, pipeline-end, end, PP-wait, DP-exposed and compute-busy time, exposed
communication per group, model FLOPs, bytes per link, and each phase's task count and summed duration (the
schedule bubble's means). Memory and the report's ratios come from these and the real workload, as for a
full run. Where no state repeats within the budget (the shorter runs together cost less than the step), the
full step runs.

The shortcut applies to the folded placement with ``memoize`` on (memoized tasks, or where tasks use the NIC
replayed and verified ones, simulator/nic_replay.py: the lock check is what makes that exact; the longer run
starts with the shorter's op-level tasks that met another flow forced), with no faults and no probe that
needs every task (traces, link statistics). Everything else runs the full step: the unfolded placement,
``memoize=False`` (the op-level differential check), faults and stragglers, probes, and steps too short to gain.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import replace

from simulator.calibration import Calibration
from simulator.engine import Engine, EngineResult, StageLog
from simulator.faults import Faults
from simulator.nic_replay import seeded_at
from simulator.periodic import LOCK_REL, Fields, candidates, extrapolate, index_step, lock_window, shift_s, valid_count
from simulator.probes import Probe, subscribed, unobserved
from simulator.ranks import Place
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from workloads.schedules import Schedule
from workloads.step import StepWorkload

# Units of the fields: each has its own noise floor (simulator/periodic.py).
TIME, BYTES, FLOPS, COUNT = "s", "B", "flop", "n"
STAGE_TIMES = ("busy_s", "pipeline_end_s", "end_s", "pp_wait_s", "dp_exposed_s", "compute_busy_s")


def run_step(
    workload: StepWorkload,
    cluster: ClusterSpec,
    calibration: Calibration,
    *,
    placement: str = "folded",
    memoize: bool = True,
    faults: Faults | None = None,
    probes: Iterable[Probe] = (),
) -> EngineResult:
    """One step's EngineResult: extrapolated from two shorter steps where their state repeats, else run."""
    probes = tuple(probes)
    watching = subscribed(probes)
    if shortcut_applies(placement, memoize, faults, watching):
        with unobserved():
            result = extrapolated(workload, cluster, calibration)
        if result is not None:
            for probe in watching:
                probe.on_run(result)
            return result
    return Engine(
        workload, cluster, calibration, placement=placement, memoize=memoize, faults=faults, probes=probes
    ).run()


def shortcut_applies(placement: str, memoize: bool, faults: Faults | None, probes: tuple[Probe, ...]) -> bool:
    """Whether a step may be extrapolated from shorter ones (see the module docstring)."""
    no_faults = faults is None or not faults.describe()
    return placement == "folded" and memoize and no_faults and not any(p.needs_full_run for p in probes)


def extrapolated(workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration) -> EngineResult | None:
    """The step's result from two shorter runs whose state repeats, or None if none was found in budget."""
    wall_start = time.perf_counter()
    timings: dict = {}  # task timings do not depend on the micro-batch count: time each once
    ops = 0
    for m_a, q, shift in candidates(workload.schedule):
        try:
            first = Engine(resized_workload(workload, m_a), cluster, calibration, timings=timings).run()
        except ConfigError:
            return None
        ops += first.simulated_ops
        records = [log.tasks for log in first.stages]
        gathered = max(log.params_gathered_s for log in first.stages)
        for period, index_shift in state_periods(workload.schedule, m_a, q, shift):
            lam_s = shift_s(records, index_shift)
            window = lock_window(records, index_shift, lam_s, gathered)
            if window is None:
                continue
            # The longer run starts from the shorter's op-level NIC tasks whose flows met another flow, each
            # where the longer run has it (simulator/nic_replay.py): fewer runs than from none, fewer op-level
            # tasks than from all.
            forced = frozenset()
            if first.nic_replay:
                begins = {(Place(0, stage, 0), task): begin for stage, log in enumerate(first.stages)
                          for task, begin, _ in log.tasks}  # fmt: skip
                repeats = (window[0], window[1] + lam_s)
                forced = seeded_at(first.nic_replay[-1].needed, index_shift, begins, repeats)
            longer = resized_workload(workload, m_a + period)
            second = Engine(longer, cluster, calibration, timings=timings, forced=forced).run()
            ops += second.simulated_ops
            if abs(second.step_time_s - first.step_time_s - lam_s) > LOCK_REL * second.step_time_s:
                return None  # the longer run is not the shorter with one period inserted: run the step
            fields = extrapolate(fields_of(first), fields_of(second), m_a, m_a + period, workload.micro_batches)
            result = result_of(fields, workload, ops, time.perf_counter() - wall_start, (m_a, m_a + period))
            result.nic_replay = first.nic_replay + second.nic_replay
            return result
    return None


def state_periods(schedule: Schedule, m_a: int, q: int, shift: int) -> Iterator[tuple[int, int]]:
    """(period, index shift) the run at m_a's state may repeat with: the schedule's period q, then 2 q (a
    DualPipeV steady state alternates two timings; periodic.candidates keeps m_a congruent to m modulo 2 q
    for it) if the longer run stays within the budget (shorter than the step)."""
    yield q, shift
    if 2 * m_a + 2 * q < schedule.micro_batches and valid_count(schedule, m_a + 2 * q):
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


def result_of(fields: Fields, workload: StepWorkload, ops: int, wall_s: float, sizes: tuple[int, int]) -> EngineResult:
    """An EngineResult from extrapolated fields (stage logs without task records)."""
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
    return EngineResult(fields[(TIME, "step")], stages, ops, wall_s, links, phases, workload, sizes)
