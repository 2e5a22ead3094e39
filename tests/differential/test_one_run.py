"""The steady shortcut from one run (simulator/fast/ledger.py, simulator/steady.period_increment): the ledger's sums on
a hand-built run, the first repeating period chosen, a run that never repeats refused, the ledger's run equal to
a run without it, and with cross-node EP the one run equal to the two-run path and the full run. The schedules against the two-run
reference and the full run are in tests/differential/test_steady.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import Engine
from simulator.engine.result import EngineResult, StageLog
from simulator.fast import steady
from simulator.fast.ledger import Ledger
from simulator.fast.periodic import BYTES, COUNT, FLOPS, TIME, lock_window
from simulator.fast.steady import fields_of, period_increment, run_step
from simulator.streams.tasks import TaskTiming
from tests.engine_diff import assert_same_fields
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.schedules.base import BACKWARD, FORWARD, Task
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec

CAL = DEFAULT_CALIBRATION
TIMING = TaskTiming(duration_s=1.0, compute_busy_s=0.5, exposed_comm_s={"ep": 0.125}, model_flops=1e12)


class _Placement:
    def __init__(self, sent: dict) -> None:
        self.bytes_sent = lambda: dict(sent)


class _Engine:  # what a ledger reads of the engine at on_start
    def __init__(self, sent: dict) -> None:
        self.placement, self.cluster = _Placement(sent), cluster_preset("h100", 8)


def _note(ledger: Ledger, stage: int, task: Task, begin_s: float, timing: TaskTiming, pp_wait_s: float) -> None:
    ledger.on_inputs(stage, stage, task, pp_wait_s, 0.0)
    ledger.on_task(stage, stage, task, begin_s, begin_s + 1, timing)


def _run(periods: int, waits: dict[int, float]) -> tuple[EngineResult, Ledger]:
    """Two stages, 1F1B-like, one second a task: stage 0 runs F(i) over [3i, 3i + 1), stage 1 F(i) over
    [3i + 1, 3i + 2) and B(i) over [3i + 2, 3i + 3); stage 1's F(i) waited ``waits[i]`` (0 if absent) for its
    input, and each B moves 100 bytes over link L. The ledger holds the entries in the order tasks end."""
    sent = {"L": 0.0}
    ledger = Ledger()
    ledger.on_start(_Engine(sent))
    stages = [StageLog(), StageLog()]
    for i in range(periods):
        for stage, task, begin_s in ((0, Task(FORWARD, i, 0), 3.0 * i), (1, Task(FORWARD, i, 0), 3.0 * i + 1)):
            stages[stage].tasks.append((task, begin_s, begin_s + 1))
            _note(ledger, stage, task, begin_s, TIMING, waits.get(i, 0.0) * stage)
        stages[1].tasks.append((Task(BACKWARD, i, 0), 3.0 * i + 2, 3.0 * i + 3))
        sent["L"] += 100.0
        _note(ledger, 1, Task(BACKWARD, i, 0), 3.0 * i + 2, TIMING, 0.0)
    for log in stages:
        log.end_s = log.pipeline_end_s = 3.0 * periods
    return EngineResult(3.0 * periods, stages, 0, 0.0, dict(sent)), ledger


def test_ledger_sums_between_two_marks() -> None:
    """From F(2)'s end on stage 0 (t = 7) to F(3)'s (t = 10): stage 1's F(2) and B(2), stage 0's F(3)."""
    _, ledger = _run(8, {2: 0.25})
    assert [(e.stage, e.task) for e in ledger.entries[:3]] == [(0, Task(FORWARD, 0, 0)), (1, Task(FORWARD, 0, 0)),
                                                               (1, Task(BACKWARD, 0, 0))]  # fmt: skip
    assert ledger.marks[Task(FORWARD, 3, 0)].entries == 10  # 3 periods of 3 entries, then F(3)'s own
    assert ledger.between(Task(FORWARD, 2, 0), Task(FORWARD, 3, 0)) == {
        (TIME, 0, "busy_s"): 1.0,
        (TIME, 1, "busy_s"): 2.0,
        (TIME, 0, "pp_wait_s"): 0.0,
        (TIME, 1, "pp_wait_s"): 0.25,
        (TIME, 0, "dp_exposed_s"): 0.0,
        (TIME, 1, "dp_exposed_s"): 0.0,
        (TIME, 0, "compute_busy_s"): 0.5,
        (TIME, 1, "compute_busy_s"): 1.0,
        (FLOPS, 0): 1e12,
        (FLOPS, 1): 2e12,
        (TIME, 0, "exposed", "ep"): 0.125,
        (TIME, 1, "exposed", "ep"): 0.25,
        (TIME, "phase", FORWARD): 2.0,
        (COUNT, FORWARD): 2,
        (TIME, "phase", BACKWARD): 1.0,
        (COUNT, BACKWARD): 1,
        (BYTES, "L"): 100.0,
    }


def test_the_first_period_that_repeats_is_taken() -> None:
    """Stage 1's F(0) waited 0.5 s (a transient before the window's state: its begin and end repeat, its wait
    does not). The window is [0, 4): one period and the longest task; the period from F(0) holds that wait, so
    its next period differs; the period from F(1) repeats in the next: one period adds 3 s to every last
    instant."""
    first, ledger = _run(8, {0: 0.5})
    records = [log.tasks for log in first.stages]
    window = lock_window(records, 1, 3.0, 0.0)
    assert window == (0.0, 4.0)
    assert lock_window(records, 1, 3.0, 0.0, send_reach_s=0.5) == (0.0, 4.5)  # a PP send's reach lengthens it
    increment = period_increment(first, ledger, 1, 3.0, window)
    assert increment == {
        **ledger.between(Task(FORWARD, 1, 0), Task(FORWARD, 2, 0)),
        (TIME, "step"): 3.0,
        **{(TIME, stage, name): 3.0 for stage in (0, 1) for name in ("pipeline_end_s", "end_s")},
    }
    assert increment[(TIME, 1, "pp_wait_s")] == 0.0
    # Waits every other period: no period from F(0) or F(1) (the stage-0 tasks that begin in [0, 4)) has a next
    # one equal to it
    for waits in ({1: 0.5}, {0: 0.5, 2: 0.5}, {1: 0.5, 3: 0.5}):
        assert period_increment(*_run(8, waits), 1, 3.0, window) is None


# 4 MoE layers, 16 experts: EP 16 over two 8-GPU nodes, so tasks' dispatch and combine cross the NIC beside PP
# sends.
SMALL = ModelSpec("small", 4, 1024, 8, 2, 2048, 16, 4, 1024)


def _nic_workload(pp: int, micro_batches: int) -> tuple[StepWorkload, object]:
    layout = layout_preset("megascale-moe").with_(pp=pp, ep=16, micro_batch=1)
    workload = StepWorkload(SMALL, layout, 16 * pp, 8, micro_batches * 2, 4096)
    return workload, replace(cluster_preset("h100", 16 * pp), nic_bandwidth_Bps=10e9)


def test_a_ledger_leaves_the_run_as_it_was() -> None:
    """The run with a ledger equals the run without, bit for bit; its entries add up to each stage's fields."""
    workload, cluster = _nic_workload(2, 12)
    ledger = Ledger()
    plain, kept = Engine(workload, cluster, CAL).run(), Engine(workload, cluster, CAL, probes=[ledger]).run()
    assert fields_of(plain) == fields_of(kept)
    assert [log.tasks for log in plain.stages] == [log.tasks for log in kept.stages]
    for stage, log in enumerate(kept.stages):
        mine = [e for e in ledger.entries if e.stage == stage]
        assert [(e.task, e.begin_s, e.end_s) for e in mine] == log.tasks
        assert sum(e.timing.model_flops for e in mine) == pytest.approx(log.model_flops, rel=1e-12)
        assert sum(e.pp_wait_s for e in mine) == pytest.approx(log.pp_wait_s, rel=1e-12, abs=1e-15)
    assert list(ledger.marks) == [task for task, _, _ in kept.stages[0].tasks]
    assert ledger.longest_send_s > cluster.nic_latency_s  # PP 2 across two nodes: every send crosses the NIC


def test_cross_node_ep_from_one_run_equals_the_two_runs_and_the_full_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks on the NIC (op level): the step extrapolated from the ledger of one run equals the two-run path and
    the full run."""
    workload, cluster = _nic_workload(2, 32)
    short = run_step(workload, cluster, CAL)
    assert short.runs == (8,)
    full = Engine(workload, cluster, CAL, memoize=False).run()
    monkeypatch.setattr(steady, "ONE_RUN", False)
    two = run_step(workload, cluster, CAL)
    assert two.runs == (8, 10)
    assert_same_fields(short.result, full)
    assert_same_fields(two.result, full)


def test_no_repeating_period_in_the_ledger_falls_back_to_two_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the ledger shows no period repeating field by field, the run one period longer decides, as before."""
    workload, cluster = _nic_workload(2, 32)
    monkeypatch.setattr(steady, "period_increment", lambda *args: None)
    assert run_step(workload, cluster, CAL).runs == (8, 10)


@pytest.mark.benchmark
def test_qwen3_bench_step_from_one_run_equals_the_full_run() -> None:
    """The bench's Qwen3-235B step (256 H100, interleaved PP 8 x VP 4, cross-node EP, 128 micro-batches): by the
    one-run path, by the run one period (8) longer beside it, and in full (tasks on the NIC at op level), every
    field to 1e-9 (seen: 1e-11). The one-run path extrapolates from its shorter run's ledger alone where two
    periods add the same (one run of 40 here); where they differ by more than the lock's tolerance (LOCK_REL of the
    shorter step: 7.8e-12 s in an F&Bdw phase sum at 32 micro-batches, between the layer's residual adds and TE's
    norm backward bytes) it takes the run one period longer too, as the reference does."""
    from experiments.cli.bench import QWEN3_CASE
    from experiments.validation.corpus import CASES_DIR, load_case
    from experiments.validation.validate import case_job
    from simulator.report.simulate import prepare

    case = load_case(CASES_DIR / f"{QWEN3_CASE}.yaml")
    job = case_job(case)
    workload, cluster, _ = prepare(job.model, job.layout, case.gpus, case.cluster, 2048, case.seq_len, None, True)
    one = steady.extrapolated(workload, cluster, CAL, one_run=True)
    two = steady.extrapolated(workload, cluster, CAL, one_run=False)
    m_a = one.runs[0]
    assert one.runs in ((m_a,), (m_a, m_a + 8)) and two.runs == (m_a, m_a + 8)
    assert m_a < workload.schedule.micro_batches
    full = Engine(workload, cluster, CAL).run()
    assert_same_fields(one.result, full)
    assert_same_fields(two.result, full)
