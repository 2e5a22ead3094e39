"""Every registered schedule's steady shortcut against its full run at three batch sizes, where tasks put their EP
all-to-alls on the NIC beside PP sends (cross-node EP: tasks at op level, the case of DeepSeek-V3 on 2,048 H800):
the shortcut did run (shorter runs than the step), and its step equals the full run field by field to 1e-9 where a
shorter run's state repeats (the exact path), or lies within the stated bound of the bounded line it took where none
does within budget: along the steady periods of the failed exact attempt's run where its stages keep one pace
(simulator/fast/run_line.py: ZB1P and DualPipeV with EP overlap at PP 2; 1F1B, ZB1P and DualPipe with EP overlap at
PP 4, from the failed attempt's run or the two-run line's longer one), else through two full runs
(simulator/fast/bounded.py; held with the one-run line declined). The exact path is
kept where it locks: 1F1B, DualPipe and DualPipeV at PP 2, interleaved 1F1B from 96 micro-batches on (in groups of 6
micro-batches where the last group holds the rest: below)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import Engine
from simulator.fast import run_line
from simulator.fast.bounded import BOUND_REL, GAP, MIN_RUN, counts, relative_error, shortest, step_of
from simulator.fast.run_line import BOUND_REL as LINE_BOUND_REL
from simulator.fast.run_line import STEP_BOUND_REL as LINE_STEP_BOUND_REL
from simulator.fast.steady import fields_of, run_step
from simulator.report.simulate import simulate
from tests.engine_diff import assert_same_fields
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec

# 4 MoE layers, 16 experts: EP 16 over two 8-GPU nodes per stage (as tests/differential/test_one_run.py)
SMALL = ModelSpec("small", 4, 1024, 8, 2, 2048, 16, 4, 1024)
VP2 = {"schedule": "interleaved", "virtual_stages": 2}
# experiments/beyond/schedules.py's schedules: each registered one, with and without EP overlap where it is valid
SCHEDULES = {
    "1f1b": {"schedule": "1f1b"},
    "zb1p": {"schedule": "zb1p"},
    "dualpipe": {"schedule": "dualpipe"},
    "dualpipe+ep_overlap": {"schedule": "dualpipe", "ep_overlap": True},
    "dualpipev": {"schedule": "dualpipev"},
    "dualpipev+ep_overlap": {"schedule": "dualpipev", "ep_overlap": True},
    "interleaved": VP2,
    "interleaved+ep_overlap": {**VP2, "ep_overlap": True},
}
# Per pipeline, by PP: even and multiples of PP (DualPipe, interleaved), long enough for the shortcut to gain (at PP 4
# and 64 the exact path's failed runs at 10 and 20 and the bounded runs at 16 and 32 cost more than the step)
MICRO_BATCHES = {2: (64, 96, 128), 4: (96, 128, 192)}
# Where the exact path locks (the rest take the bounded one); at PP 4 the two-chunk schedules do not fit 4 layers
EXACT = {
    2: {"1f1b", "dualpipe", "dualpipe+ep_overlap", "dualpipev", "interleaved", "interleaved+ep_overlap"},
    4: {"dualpipe"},
}
# Where the bounded line is the one along one run's steady periods (all the bounded cases here; the two-run line is
# held below with the one-run line declined)
ONE_RUN_LINE = {
    (2, "zb1p"): (64, 96, 128),
    (2, "dualpipev+ep_overlap"): (64, 96, 128),
    (4, "1f1b"): (96, 128, 192),
    (4, "zb1p"): (96, 128, 192),
    (4, "dualpipe+ep_overlap"): (96, 128, 192),
}
CASES = [(name, pp, m) for pp in (2, 4) for name in SCHEDULES for m in MICRO_BATCHES[pp]]
CASES = [case for case in CASES if case[1] == 2 or not case[0].startswith(("dualpipev", "interleaved"))]


def _step(changes: dict, micro_batches: int, pp: int) -> tuple[StepWorkload, object]:
    layout = layout_preset("megascale-moe").with_(pp=pp, ep=16, micro_batch=1, **changes)
    workload = StepWorkload(SMALL, layout, 16 * pp, 8, micro_batches * 2, 4096)  # DP 2
    return workload, replace(cluster_preset("h100", 16 * pp), nic_bandwidth_Bps=10e9)


@pytest.mark.parametrize("name, pp, micro_batches", CASES)
def test_each_schedule_extrapolates_to_its_full_run(name: str, pp: int, micro_batches: int) -> None:
    workload, cluster = _step(SCHEDULES[name], micro_batches, pp)
    assert workload.tasks_use_nic and workload.micro_batches == micro_batches
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    full = Engine(workload, cluster, DEFAULT_CALIBRATION).run()
    assert step.runs and sum(step.runs) < micro_batches  # the shortcut ran
    if name in EXACT[pp]:
        assert step.bound_rel == 0.0
        assert_same_fields(step.result, full)
        return
    one_run = micro_batches in ONE_RUN_LINE.get((pp, name), ())
    assert (step.bound_rel, len(step.runs)) == ((LINE_BOUND_REL, 1) if one_run else (BOUND_REL, 2))
    error, field = relative_error(fields_of(step.result), fields_of(full))
    assert error <= step.bound_rel, field
    if one_run:  # the step itself within the line's step bound (what the search's lower bound gives up)
        assert abs(step.result.step_time_s / full.step_time_s - 1) <= LINE_STEP_BOUND_REL


@pytest.mark.parametrize("pp, micro_batches", [(2, 64), (4, 96)])
def test_gathers_from_the_first_forward_extrapolate_as_aligned_ones(pp: int, micro_batches: int) -> None:
    """Megatron-LM's plain 1F1B (no --align-param-gather: each stage starts its weight gather at its first forward,
    grad_sync.ParamGather) takes the path the aligned 1F1B takes: exact at PP 2, the one-run line at PP 4."""
    workload, cluster = _step({"schedule": "1f1b", "align_param_gather": False}, micro_batches, pp)
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    full = Engine(workload, cluster, DEFAULT_CALIBRATION).run()
    if pp == 2:
        assert step.bound_rel == 0.0
        assert_same_fields(step.result, full)
        return
    assert (step.bound_rel, len(step.runs)) == (LINE_BOUND_REL, 1)
    error, field = relative_error(fields_of(step.result), fields_of(full))
    assert error <= step.bound_rel, field


@pytest.mark.parametrize("name, pp, micro_batches", [("zb1p", 2, 96), ("1f1b", 4, 96), ("dualpipe+ep_overlap", 4, 128)])
def test_the_two_run_line_where_one_run_does_not_hold(
    monkeypatch: pytest.MonkeyPatch, name: str, pp: int, micro_batches: int
) -> None:
    """With the one-run line declined everywhere (stages never keep one pace), the step is on the line through two
    full runs, within its own bound."""
    monkeypatch.setattr(run_line, "PACE_REL", -1.0)
    workload, cluster = _step(SCHEDULES[name], micro_batches, pp)
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    full = Engine(workload, cluster, DEFAULT_CALIBRATION).run()
    assert (step.bound_rel, len(step.runs)) == (BOUND_REL, 2) and sum(step.runs) < micro_batches
    error, field = relative_error(fields_of(step.result), fields_of(full))
    assert error <= BOUND_REL, field


def test_bounded_runs_are_congruent_whole_periods() -> None:
    """The bounded path's two runs keep the step's warm-up and cool-down: congruent to it modulo the period (2 q for
    short ones), each with a steady period on every stage, and together shorter than the step."""
    workload, _ = _step(SCHEDULES["dualpipev+ep_overlap"], 256, 2)
    schedule = workload.schedule
    m_a, m_b = counts(schedule)
    step = step_of(schedule)
    assert (256 - m_a) % step == 0 and (256 - m_b) % step == 0 and m_a + m_b < 256
    assert m_a >= max(MIN_RUN, shortest(schedule)) and m_b >= GAP * m_a
    assert counts(schedule.resized(m_a + m_b)) is None  # not below the full step's cost: runs in full


def test_the_report_says_when_a_step_is_bounded() -> None:
    """The report's summary says the step was extrapolated and within what; an exact shortcut says neither."""
    lines = {}
    for name in ("zb1p", "1f1b"):
        workload, cluster = _step(SCHEDULES[name], 96, 2)
        report = simulate(SMALL, workload.layout, cluster=cluster, global_batch=workload.global_batch, seq_len=4096)
        lines[name] = next(line for line in report.summary().splitlines() if "simulated" in line)
        assert report.steady_runs and "steady_bound" not in report.to_row()
    assert f"extrapolated, within {LINE_BOUND_REL:.2%})" in lines["zb1p"]  # along one run's steady periods
    assert "extrapolated" not in lines["1f1b"] and lines["1f1b"].endswith("micro-batches)")


@pytest.mark.parametrize("micro_batches, exact", [(96, False), (128, True), (130, True)])
def test_interleaved_groups_extrapolate_to_their_full_run(micro_batches: int, exact: bool) -> None:
    """The interleaved schedule in groups of 6 micro-batches (--microbatch-group-size-per-virtual-pipeline-stage) at
    PP 2: the last group whole at 96 (no shorter run's state repeats in budget: the two-run line) and holding 2 or 4
    at 128 and 130 (runs congruent modulo the group keep that rest: a state that repeats, the exact path)."""
    workload, cluster = _step({**VP2, "microbatch_group": 6}, micro_batches, 2)
    assert workload.schedule.group_size == 6
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    full = Engine(workload, cluster, DEFAULT_CALIBRATION).run()
    assert step.runs and sum(step.runs) < micro_batches and all(run % 6 == micro_batches % 6 for run in step.runs)
    if exact:
        assert step.bound_rel == 0.0
        assert_same_fields(step.result, full)
        return
    error, field = relative_error(fields_of(step.result), fields_of(full))
    assert step.bound_rel == BOUND_REL and error <= step.bound_rel, field
