"""NIC replay (simulator/fast/nic_replay.py): tasks on the NIC replayed, verified and re-run with the conflicting ones at
op level, against every task at op level (``memoize=False``) to 1e-9 on every StageLog field; the conflict
check on hand-made spans; a PP send inside a reserved span; the limits; probes; the steady shortcut's seed."""

from __future__ import annotations

import pickle
from dataclasses import fields, replace

import pytest
import simpy

from simulator.fast import nic_replay
from simulator.fast import steady
from simulator.engine.engine import Engine, EngineResult
from simulator.engine.flow_log import FlowLog, Span, SpanIndex, merged
from simulator.fast.nic_replay import NicReplayTimer, ReplayStats, TaskId, next_forced, seeded_at
from simulator.engine.probes import Probe
from simulator.engine.ranks import Place
from simulator.fast.steady import run_step
from topologies.cluster import cluster_preset
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec
from workloads.schedules.base import BACKWARD, FORWARD, Task
from workloads.graph.step import StepWorkload
from tests.toys import SCENARIO_CALIBRATION

REL = 1e-9
# The scenarios below (which tasks conflict, how many runs a forecast takes) were drawn at the residual fitted
# before the wgrads' main-grad accumulation was charged; pinned so that a refit does not move them.
# Collective and PP-send latencies are the default (NCCL's model since stop 36); scenarios that stopped showing
# their property under it were re-drawn (tests/differential/test_forecast_retry.py CONFLICTS).
CAL = SCENARIO_CALIBRATION.with_(compute_residual=0.6271)
# 4 MoE layers, 16 experts: EP 16 spans two 8-GPU nodes (SP 8 in a node), so every task's dispatch and
# combine cross the NIC, and PP sends (each stage on its own nodes) and DP buckets (DP 2) share it.
SMALL = ModelSpec("small", 4, 1024, 8, 2, 2048, 16, 4, 1024)


def _workload(pp: int, micro_batches: int, nic_Bps: float = 10e9, replicas: int = 1, **changes):
    """``pp`` stages of 16 GPUs (two DP replicas of 8 sharing each EP group), ``replicas`` x 2 DP in all."""
    layout = layout_preset("megascale-moe").with_(pp=pp, ep=16, micro_batch=1, **changes)
    gpus = 16 * pp * replicas
    workload = StepWorkload(SMALL, layout, gpus, 8, micro_batches * 2 * replicas, 4096)
    return workload, replace(cluster_preset("h100", gpus), nic_bandwidth_Bps=nic_Bps)


@pytest.fixture
def no_forecast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every task of a step's first run replayed (no forecast seed): what the verification alone does."""
    monkeypatch.setattr(nic_replay, "FORECAST", False)


@pytest.fixture
def unlimited(monkeypatch: pytest.MonkeyPatch) -> None:
    """Verify until no task conflicts, however many are forced (the limits would put all at op level)."""
    monkeypatch.setattr(nic_replay, "MAX_CONFLICT_FRACTION", 1.0)
    monkeypatch.setattr(nic_replay, "MAX_RUNS", 10**6)


def _assert_same(replayed: EngineResult, reference: EngineResult) -> None:
    """Step time, every StageLog field (task records too), bytes per link and phase spans, to 1e-9."""
    assert replayed.step_time_s == pytest.approx(reference.step_time_s, rel=REL)
    for mine, theirs in zip(replayed.stages, reference.stages, strict=True):
        for field in fields(mine):
            a, b = getattr(mine, field.name), getattr(theirs, field.name)
            if field.name == "tasks":
                assert [t for t, _, _ in a] == [t for t, _, _ in b]
                assert [s for _, s, e in a for s in (s, e)] == pytest.approx(
                    [s for _, s, e in b for s in (s, e)], rel=REL
                )
            elif isinstance(b, dict):
                assert a.keys() == b.keys() and all(a[k] == pytest.approx(b[k], rel=REL) for k in b), field.name
            else:
                assert a == pytest.approx(b, rel=REL, abs=1e-15), field.name
    assert replayed.network_bytes.keys() == reference.network_bytes.keys()
    for link, nbytes in reference.network_bytes.items():
        assert replayed.network_bytes[link] == pytest.approx(nbytes, rel=REL), link
    assert replayed.phase_spans.keys() == reference.phase_spans.keys()


SCHEDULES = {
    "1f1b": (2, 8, {}),
    "1f1b-pp4": (4, 8, {}),
    "dp4": (2, 4, {"replicas": 2}),  # DP 4: two EP groups per stage, DP buckets on the NIC
    "interleaved": (2, 4, {"schedule": "interleaved", "virtual_stages": 2}),
    "ep-overlap": (2, 4, {"schedule": "interleaved", "virtual_stages": 2, "ep_overlap": True}),
    "ep-overlap-3GBps": (2, 4, {"schedule": "interleaved", "virtual_stages": 2, "ep_overlap": True, "nic_Bps": 3e9}),
    "ep-overlap-dw": (2, 4, {"schedule": "interleaved", "virtual_stages": 2, "ep_overlap": True, "delay_wgrad": True}),
    "dualpipev": (2, 4, {"schedule": "dualpipev"}),
}


@pytest.mark.parametrize("forecast", [False, True])
@pytest.mark.parametrize("name", SCHEDULES)
def test_replay_equals_op_level(name: str, forecast: bool, unlimited: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each schedule with PP across nodes and DP: some tasks replayed, some forced, the step as at op level;
    without the forecast's seed a conflict is found and the step re-run."""
    monkeypatch.setattr(nic_replay, "FORECAST", forecast)
    pp, micro_batches, changes = SCHEDULES[name]
    workload, cluster = _workload(pp, micro_batches, **changes)
    engine = Engine(workload, cluster, CAL)
    assert workload.tasks_use_nic and engine.nic_replay and not engine.memoize
    replayed = engine.run()
    (stats,) = replayed.nic_replay
    if forecast and stats.forced is None:  # its forecast runs met conflicts and stopped: the step at op level
        assert stats.runs >= 2
    else:
        assert stats.forced is not None and 0 < len(stats.forced) < stats.nic_tasks  # both paths ran
        assert stats.runs >= 2 or forecast  # without the forecast a conflict is found and the step re-run
    reference = Engine(workload, cluster, CAL, memoize=False).run()
    assert reference.nic_replay == ()
    _assert_same(replayed, reference)


def test_unverified_replay_differs(monkeypatch: pytest.MonkeyPatch, no_forecast: None) -> None:
    """Without the check (no conflict ever found) the replay is wrong: the verification is what makes it exact."""
    workload, cluster = _workload(2, 8)
    reference = Engine(workload, cluster, CAL, memoize=False).run()
    monkeypatch.setattr(NicReplayTimer, "conflicts", lambda self: set())
    optimistic = Engine(workload, cluster, CAL).run()
    assert optimistic.nic_replay[0].forced == frozenset()
    assert abs(optimistic.step_time_s - reference.step_time_s) > 1e-6 * reference.step_time_s


def test_no_conflict_forces_nothing(no_forecast: None) -> None:
    """PP 1 at 100 GB/s: the DP buckets (gathered before the first forward, reduced after the last backward)
    miss every task's NIC spans, so one run replays all 8 tasks and equals the op-level run."""
    workload, cluster = _workload(1, 4, nic_Bps=100e9)
    replayed = Engine(workload, cluster, CAL).run()
    assert replayed.nic_replay == (ReplayStats(1, frozenset(), 8),)
    assert replayed.nic_replay[0].forced_fraction == 0.0
    _assert_same(replayed, Engine(workload, cluster, CAL, memoize=False).run())


# --- the conflict check, by hand ---------------------------------------------------------------------------


def test_spans_merge_and_overlap_by_hand() -> None:
    assert merged([(3.0, 4.0), (0.0, 1.0), (0.5, 2.0), (2.0, 2.5)]) == ((0.0, 2.5), (3.0, 4.0))
    index = SpanIndex([(0.0, 1.0), (5.0, 6.0), (2.0, 3.0)])
    assert index.overlaps(0.5, 0.6) and index.overlaps(2.9, 5.1) and index.overlaps(-1.0, 10.0)
    assert not index.overlaps(1.0, 2.0)  # touching at both ends: no positive overlap
    assert not index.overlaps(3.0, 5.0) and not index.overlaps(6.0, 7.0) and not index.overlaps(-1.0, 0.0)
    assert not SpanIndex([]).overlaps(0.0, 1.0)


def test_flow_log_records_when_a_flow_occupies_its_links() -> None:
    """Two 1 GB flows on one 10 GB/s link, the second started at 0.05 s: 0.5 GB moves alone, then each gets
    5 GB/s: the first ends at 0.05 + 0.5 / 5 = 0.15 s, the second at 0.15 + 0.5 / 10 = 0.2 s. A zero-byte flow
    occupies nothing."""
    from simulator.streams.network import FluidNetwork

    env = simpy.Environment()
    network, log = FluidNetwork(env, {"a": 10e9, "b": 10e9}), FlowLog(env)

    def second():
        yield env.timeout(0.05)
        log.watch(("a", "b"), network.transfer(("a", "b"), 1e9))

    log.watch(("a",), network.transfer(("a",), 1e9))
    log.watch(("a",), network.transfer(("a",), 0.0))
    env.process(second())
    env.run()
    assert log.spans["a"] == [pytest.approx((0.0, 0.15)), pytest.approx((0.05, 0.2))]
    assert log.spans["b"] == [pytest.approx((0.05, 0.2))]


def _timer(reserved: list, spans: dict) -> NicReplayTimer:
    workload, cluster = _workload(2, 8)
    timer = Engine(workload, cluster, CAL).timer
    assert isinstance(timer, NicReplayTimer)
    timer.reserved, timer.log.spans = reserved, spans
    return timer


def test_conflicts_by_hand() -> None:
    """Task a holds [1, 2) and [3, 4) on nic_out 0; task b holds [2, 3) there and [1, 2) on nic_in 1."""
    a, b, c = ((Place(0, 0, 0), Task(FORWARD, i, 0)) for i in range(3))
    out, into = ("nic_out", 0), ("nic_in", 1)
    held = [(a, out, 1.0, 2.0), (a, out, 3.0, 4.0), (b, out, 2.0, 3.0), (b, into, 1.0, 2.0)]
    assert _timer(held, {}).conflicts() == set()  # back to back: no positive overlap
    assert _timer(held, {out: [(0.0, 1.0), (4.0, 5.0)], into: [(2.0, 9.0)]}).conflicts() == set()
    assert _timer(held, {out: [(3.5, 3.6)]}).conflicts() == {a}  # a PP send inside a's second span
    assert _timer(held, {into: [(0.0, 1.5)]}).conflicts() == {b}
    assert _timer(held, {("nic_in", 0): [(0.0, 9.0)]}).conflicts() == set()  # another link
    assert _timer([*held, (c, out, 2.5, 3.5)], {}).conflicts() == {a, b, c}  # c overlaps b's and a's spans


def _pp_send(engine: Engine, after_s: float):
    """A 1 MB PP send from stage 0 to stage 1 started ``after_s`` into the run."""
    yield engine.env.timeout(after_s)
    yield engine.placement.transfer(engine.placement.pp_links(Place(0, 0, 0), Place(0, 1, 0)), 1e6)


def first_forward_and_send(start_at: str) -> tuple[Engine, TaskId, Span, float]:
    """Stage 0's first forward started at t0 = 0 and a PP send to stage 1 halfway through the forward's first
    NIC span on nic_out 0 (``start_at`` "inside") or when its last span ends ("after"), not yet run: the
    engine, the task, that first span (the footprint's) and when the send starts."""
    workload, cluster = _workload(2, 8)
    place, task = Place(0, 0, 0), Task(FORWARD, 0, 0)
    engine = Engine(workload, cluster, CAL)
    found = engine.timer.footprint(workload.task_key(0, task), 0)
    (first, *_), last_end = found.nic_spans[0], max(spans[-1][1] for spans in found.nic_spans)
    send_at = (first[0] + first[1]) / 2 if start_at == "inside" else last_end
    engine.env.process(engine.timer.run(place, task))
    engine.env.process(_pp_send(engine, send_at))
    return engine, (place, task), first, send_at


@pytest.mark.parametrize("start_at", ["inside", "after"])
def test_a_pp_send_inside_a_reserved_span_forces_the_task(start_at: str, no_forecast: None) -> None:
    """Stage 0's first forward replayed at t0 = 0 reserves its footprint's spans; a PP send to stage 1 started
    halfway through its first span on nic_out 0 conflicts with it; one started when its last span ends does not."""
    engine, (place, task), first, _ = first_forward_and_send(start_at)
    timer = engine.timer
    engine.env.run()
    assert ((place, task), ("nic_out", 0), *first) in timer.reserved  # t0 = 0: the footprint's own span
    assert timer.conflicts() == ({(place, task)} if start_at == "inside" else set())


# --- limits, seeds, probes ---------------------------------------------------------------------------------


def test_limits_put_every_task_at_op_level(no_forecast: None) -> None:
    """Interleaved with EP overlap at 3 GB/s: most tasks conflict in the first run, past the 20% limit, so the
    second run is the all-op-level run."""
    workload, cluster = _workload(2, 4, **SCHEDULES["ep-overlap-3GBps"][2])
    result = Engine(workload, cluster, CAL).run()
    (stats,) = result.nic_replay
    assert (stats.runs, stats.forced, stats.forced_fraction) == (2, None, 1.0)
    _assert_same(result, Engine(workload, cluster, CAL, memoize=False).run())
    one, two, three = ((Place(0, 0, 0), Task(FORWARD, i, 0)) for i in range(3))
    assert next_forced(frozenset({one, two}), {three}, 5, 1) == {one, two, three}  # 1 conflict of 5: not past 20%
    assert next_forced(frozenset(), {two, three}, 5, 1) is None  # 2 of 5
    assert next_forced(frozenset(), {one}, 10, nic_replay.MAX_RUNS) is None
    assert next_forced(None, set(), 10, 1) is None


def test_needed_tasks_alone_make_a_run_without_conflicts(no_forecast: None) -> None:
    """The all-op-level run of the 3 GB/s case says which tasks' NIC flows met another flow; forcing only those
    (the rest replayed) runs once, without a conflict, and equals the op-level run: the others ran alone."""
    workload, cluster = _workload(2, 4, **SCHEDULES["ep-overlap-3GBps"][2])
    (stats,) = Engine(workload, cluster, CAL).run().nic_replay
    assert stats.forced is None and 0 < len(stats.needed) < stats.nic_tasks
    again = Engine(workload, cluster, CAL, forced=stats.needed).run()
    assert again.nic_replay[0].runs == 1 and again.nic_replay[0].forced == stats.needed
    _assert_same(again, Engine(workload, cluster, CAL, memoize=False).run())


def test_needed_found_when_asked(no_forecast: None) -> None:
    """``Engine(needed=False)``: the run's stats say None (picklable, no flow log kept) and ``needed()`` finds,
    once, the tasks the eager run finds, over the same run."""
    workload, cluster = _workload(2, 4, **SCHEDULES["ep-overlap-3GBps"][2])
    (eager,) = Engine(workload, cluster, CAL).run().nic_replay
    engine = Engine(workload, cluster, CAL, needed=False)
    (lazy,) = engine.run().nic_replay
    assert lazy.needed is None and pickle.loads(pickle.dumps(lazy)) == lazy
    assert (lazy.runs, lazy.forced) == (eager.runs, eager.forced)
    assert engine.needed() == eager.needed and eager.needed
    with pytest.raises(RuntimeError):
        engine.needed()


def test_seed_maps_each_task_where_the_longer_run_has_it() -> None:
    """Tasks that began at 1 s (before the repeated state over [2, 5) s), 3 s (in it) and 6 s (after it), with
    a shift of 2 micro-batches: the first stays, the second stays and is taken 2 micro-batches later too, the
    third is taken later only."""
    place = Place(0, 0, 0)
    early, inside, late = ((place, Task(FORWARD, i, 0)) for i in range(3))
    paired = (place, Task(BACKWARD, 3, 0, (5, 1)))
    begins = {early: 1.0, inside: 3.0, late: 6.0, paired: 4.0}
    later = [(place, Task(FORWARD, 3, 0)), (place, Task(FORWARD, 4, 0)), (place, Task(BACKWARD, 5, 0, (7, 1)))]
    assert seeded_at(frozenset(begins), 2, begins, (2.0, 5.0)) == {early, inside, paired, *later}
    assert seeded_at(None, 2, begins, (2.0, 5.0)) is None


def test_steady_shortcut_with_replay_equals_op_level(unlimited: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two-run steady shortcut (the reference of the one-run path, tests/differential/test_one_run.py): 1F1B over 32
    micro-batches from runs at m_a and m_a + 2 periods (8 and 10: from pp x 1 + 2 + 3 periods,
    Schedule.fill_per_stage), the longer seeded with the shorter's needed tasks where it has them: here stage 1's
    first forward alone (its DP parameter gather meets it), which runs before the repeated state, so the longer
    run forces it as it is and runs once. At 12 GB/s per NIC (at 10 GB/s, since stop 36's collective latencies,
    stage 0's F2, F4 and F6 are needed as well)."""
    monkeypatch.setattr(steady, "ONE_RUN", False)
    workload, cluster = _workload(2, 32, nic_Bps=12e9)
    short = run_step(workload, cluster, CAL)
    assert short.steady_runs == (8, 10) and len(short.nic_replay) == 2
    first, second = short.nic_replay
    assert first.needed == {(Place(0, 1, 0), Task(FORWARD, 0, 0))}
    assert second.forced == first.needed and second.runs == 1
    full = Engine(workload, cluster, CAL, memoize=False).run()
    assert short.step_time_s == pytest.approx(full.step_time_s, rel=REL)
    for mine, theirs in zip(short.stages, full.stages, strict=True):
        assert mine.end_s == pytest.approx(theirs.end_s, rel=REL)
        assert mine.busy_s == pytest.approx(theirs.busy_s, rel=REL)
        assert mine.pp_wait_s == pytest.approx(theirs.pp_wait_s, rel=REL, abs=1e-15)
        assert mine.exposed_comm_s == pytest.approx(theirs.exposed_comm_s, rel=REL)


class _Tasks(Probe):
    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_task(self, place, stage, task, begin_s, end_s, timing) -> None:
        self.ends.append(end_s)


class _Rates(Probe):
    def on_link_rates(self, network) -> None:
        pass


@pytest.mark.parametrize("forecast", [False, True])
def test_probes_see_the_run_that_stands(forecast: bool, unlimited: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task probe is told of the last run's tasks only (with the forecast: the first run's forced tasks and its
    forecast's); a probe of link rates gets every task at op level."""
    monkeypatch.setattr(nic_replay, "FORECAST", forecast)
    workload, cluster = _workload(2, 8)
    probe = _Tasks()
    result = Engine(workload, cluster, CAL, probes=[probe]).run()
    assert result.nic_replay[0].runs == (1 if forecast else 2)
    assert sorted(probe.ends) == pytest.approx(sorted(end for log in result.stages for _, _, end in log.tasks))
    watched = Engine(workload, cluster, CAL, probes=[_Rates()])
    assert not watched.nic_replay
    _assert_same(result, watched.run())


def test_spans_that_touch_within_rounding_do_not_overlap() -> None:
    """At t = 10 s an overlap of 1e-14 s (a few ulps) is rounding, one of 1e-11 s is not (TOUCH_REL = 1e-13)."""
    index = SpanIndex([(9.0, 10.0 + 1e-14)])
    assert not index.overlaps(10.0, 11.0)
    assert SpanIndex([(9.0, 10.0 + 1e-11)]).overlaps(10.0, 11.0)
    assert not SpanIndex([(10.0 - 1e-14, 11.0)]).overlaps(9.0, 10.0)
