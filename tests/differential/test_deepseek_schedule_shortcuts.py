"""The steady shortcut against the full run on issue 38's own case, DeepSeek-V3 on 2,048 H800s (PP 16, cross-node EP
64: tasks at op level beside the PP sends), for every registered schedule with and without EP overlap
(experiments/beyond/steady_bound.py's list): where it extrapolates exactly, every field equals the full run's to 1e-9;
where it takes a bounded line, every field lies within that line's bound (simulator/fast/run_line.py's along one run's
steady periods, simulator/fast/bounded.py's through two); and it never simulates
more micro-batches than the step has. Every step is run in full too (about 80 CPU s in all): under ``-m benchmark``.
The default run holds the same schedules on a 4-layer model (tests/differential/test_schedule_shortcuts.py) and the
lone-run path below on it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from experiments.beyond.steady_bound import SCHEDULE_NAMES, deepseek
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import Engine
from simulator.fast import steady
from simulator.fast.bounded import BOUND_REL, relative_error
from simulator.fast.periodic import candidates
from simulator.fast.run_line import BOUND_REL as LINE_BOUND_REL
from simulator.fast.run_line import STEP_BOUND_REL as LINE_STEP_BOUND_REL
from simulator.fast.steady import fields_of, run_step
from tests.engine_diff import assert_same_fields
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec


@pytest.mark.benchmark
@pytest.mark.parametrize("micro_batches", (64, 128, 256))
@pytest.mark.parametrize("name", SCHEDULE_NAMES)
def test_deepseek_v3_shortcut_against_the_full_run(name: str, micro_batches: int) -> None:
    workload, cluster = deepseek(name, micro_batches)
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    full = Engine(workload, cluster, DEFAULT_CALIBRATION).run()
    if not step.runs:  # ran in full
        assert_same_fields(step.result, full)
        return
    assert sum(step.runs) < micro_batches
    if step.bound_rel == 0.0:
        assert_same_fields(step.result, full)
    else:
        assert step.bound_rel in (BOUND_REL, LINE_BOUND_REL)
        error, field = relative_error(fields_of(step.result), fields_of(full))
        assert error <= step.bound_rel, field
        step_bound = LINE_STEP_BOUND_REL if step.bound_rel == LINE_BOUND_REL else BOUND_REL
        assert abs(step.result.step_time_s / full.step_time_s - 1) <= step_bound


@pytest.mark.benchmark
def test_the_reports_own_dualpipe_layout_on_the_line_from_six_periods() -> None:
    """`moesim validate`'s DeepSeek-V3 report row (its DualPipe layout, F&B pairs in the report's order, 120
    micro-batches): the failed exact attempt at 56 keeps 6 steady periods after MSER, and the line along them lies
    within its bounds of the full run (9.2e-4 measured; simulator/fast/run_line.py MIN_PERIODS)."""
    from experiments.validation.corpus import load_cases
    from experiments.validation.validate import case_job
    from simulator.report.simulate import prepare

    case = next(case for case in load_cases() if case.name == "deepseek-v3-report-h800-2048")
    job = case_job(case)
    workload, cluster, _ = prepare(
        job.model,
        job.layout,
        case.gpus,
        case.cluster,
        case.global_batch,
        case.seq_len,
        None,
        False,
        DEFAULT_CALIBRATION,
    )
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    full = Engine(workload, cluster, DEFAULT_CALIBRATION).run()
    assert (step.runs, step.bound_rel) == ((56,), LINE_BOUND_REL)
    assert relative_error(fields_of(step.result), fields_of(full))[0] <= LINE_BOUND_REL
    assert abs(step.result.step_time_s / full.step_time_s - 1) <= LINE_STEP_BOUND_REL


# 4 MoE layers, 16 experts: EP 16 over two 8-GPU nodes per stage (as tests/differential/test_schedule_shortcuts.py)
SMALL = ModelSpec("small", 4, 1024, 8, 2, 2048, 16, 4, 1024)


def _small(micro_batches: int, **changes: object) -> tuple[StepWorkload, object]:
    """The 4-layer model at PP 2 with cross-node EP 16 (DP 2), as tests/differential/test_schedule_shortcuts.py."""
    layout = layout_preset("megascale-moe").with_(pp=2, ep=16, micro_batch=1, **changes)
    workload = StepWorkload(SMALL, layout, 32, 8, micro_batches * 2, 4096)
    return workload, replace(cluster_preset("h100", 32), nic_bandwidth_Bps=10e9)


INTERLEAVED_EP = {"schedule": "interleaved", "virtual_stages": 2, "ep_overlap": True}


def test_a_lone_run_of_half_the_step_extrapolates_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Interleaved 1F1B with EP overlap at 24 micro-batches: no bounded pair is cheaper than the step and the runs at
    12 and 14 together are not, so before the lone run was admitted the step ran in full; the run at 12 (half the
    step) locks and its ledger repeats, and the step from it equals the full run field by field."""
    workload, cluster = _small(24, **INTERLEAVED_EP)
    assert not list(candidates(workload.schedule))
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    assert step.runs == (12,) and step.bound_rel == 0.0
    assert_same_fields(step.result, Engine(workload, cluster, DEFAULT_CALIBRATION).run())
    monkeypatch.setattr(steady, "ONE_RUN", False)  # two runs needed: 12 and 14 cost more than the step
    assert run_step(workload, cluster, DEFAULT_CALIBRATION).runs == ()


@pytest.mark.parametrize(
    ("micro_batches", "changes"), [(32, {"schedule": "dualpipe"}), (24, {"schedule": "dualpipev"})]
)
def test_a_lone_run_that_does_not_lock_leaves_the_full_run(micro_batches: int, changes: dict) -> None:
    """DualPipe at 32 and DualPipeV at 24 micro-batches admit a lone run at half the step (and no run beside one a
    period longer) that does not lock: the step then runs in full, the same floats as the engine's own run."""
    workload, cluster = _small(micro_batches, **changes)
    assert [count for count, _, _ in candidates(workload.schedule, one_run=True)] == [micro_batches // 2]
    assert not list(candidates(workload.schedule))
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    assert step.runs == ()
    full = Engine(workload, cluster, DEFAULT_CALIBRATION).run()
    assert fields_of(step.result) == fields_of(full)
