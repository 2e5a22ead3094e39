"""The PP-send forecast that seeds a step's first NIC-replay run (simulator/fast/send_forecast.py): its sends and
overlaps by hand on 1F1B over two stages on two nodes (tasks waiting for their inputs, op-level tasks' windows),
a paired task's two sends, DualPipeV's turn, DP buckets in flight, and first runs it keeps off the all-op-level
fallback, equal to the op-level run (the exactness on every schedule: test_nic_replay)."""

from __future__ import annotations

import pytest
import simpy

from simulator.fast import nic_replay
from simulator.fast import send_forecast
from simulator.engine.engine import Engine
from simulator.engine.flow_log import FlowLog
from simulator.engine.placement import DpBucket
from simulator.engine.ranks import Place
from simulator.fast.send_forecast import SendForecast
from tests.differential.test_nic_replay import CAL, SCHEDULES, _assert_same, _workload, first_forward_and_send
from workloads.schedules.base import BACKWARD, FORWARD, Task

OUT0, IN0, OUT1, IN1 = ("nic_out", 0), ("nic_in", 0), ("nic_out", 1), ("nic_in", 1)


def _forecast() -> SendForecast:
    """1F1B on PP 2 (stage 0 runs F0 F1 B0 ..., stage 1 F0 B0 F1 ...), every task 0.5 s alone."""
    workload, cluster = _workload(2, 8)
    return SendForecast(Engine(workload, cluster, CAL).placement, lambda stage, task: 0.5)


def sends(forecast: SendForecast, stage: int, links: tuple, until_s: float) -> list:
    """The forecast sends on ``links`` of ``stage`` (about to start a task that ends by ``until_s``: its own next
    sends are not forecast), from every stage that sends over its NIC: what ``SendForecast.meets`` checks a task's
    spans against."""
    found = []
    for sender in forecast.senders(stage):
        known, following = forecast.stage_sends(sender, until_s, following=sender != stage)
        found.extend(send for send in known if send[0] in links)
        found.extend(send for send in following if send[0] in links and send[1] < until_s)
    return found


def assert_sends(got: list, want: list) -> None:
    """Forecast sends equal: the same links in order, their (start, end) to 1e-12 (pytest.approx takes no tuples
    of a link and floats)."""
    assert [link for link, _, _ in got] == [link for link, _, _ in want]
    assert [t for _, *span in got for t in span] == pytest.approx([t for _, *span in want for t in span], rel=1e-12)


A = 1048576 / 9.4e9  # a PP send alone: 1 x 4096 / 8 tokens x 1024 x 2 B at 10 GB/s x 0.94
LAT = 22.4e-6  # a send over the NIC: NCCL's fixed 8.4 us and one network step, 14 us (topologies.cluster)
E = LAT + A  # a cross-node input arrives this long after its producer ends (at the latest LAT + 1.2 A)


def test_sends_by_hand() -> None:
    """A PP send is 1 x 4096 / 8 tokens x 1024 x 2 B = 1,048,576 B; at 10 GB/s x 0.94 and SEND_SLOWDOWN 1.2
    it is forecast to take 1.2 x 1048576 / 9.4e9 s, from the task's end plus the 22.4 us NIC latency."""
    forecast = _forecast()
    send_s = 1.2 * A
    assert send_forecast.SEND_SLOWDOWN == 1.2 and forecast.send_s == pytest.approx(send_s, rel=1e-12)
    # Nothing started: stage 0's F0 is forecast over [0, 0.5), F1 over [0.5, 1.0); stage 1 asking until 0.4 is
    # told of neither send (they start after it), until 1.2 of both; stage 0's B0 waits for stage 1's (below).
    assert sends(forecast, 1, (OUT1, IN1), 0.4) == []
    assert_sends(
        sends(forecast, 1, (OUT1, IN1), 1.2),
        [(IN1, 0.5 + LAT, 0.5 + LAT + send_s), (IN1, 1.0 + LAT, 1.0 + LAT + send_s)],
    )
    forecast = _forecast()
    forecast.started(0, Task(FORWARD, 0, 0), 1.0)  # replayed: ends at 1.0; F1 follows at 1.0 + 0.5
    expected = [(IN1, 1.0 + LAT, 1.0 + LAT + send_s), (IN1, 1.5 + LAT, 1.5 + LAT + send_s)]
    assert_sends(sends(forecast, 1, (OUT1, IN1), 1.6), expected)
    assert_sends(sends(forecast, 1, (OUT1, IN1), 1.2), expected[:1])  # F1's after the asker
    # Stage 0 asking (its next task starts): F0's send on its nic_out, not the asker's own (F1's) after it.
    own = [(OUT0, 1.0 + LAT, 1.0 + LAT + send_s), (IN1, 1.0 + LAT, 1.0 + LAT + send_s)]
    assert_sends(sends(forecast, 0, (OUT0, IN0, IN1), 1.6), own)
    forecast.ended(0, 1.2)  # at op level it took 0.2 s more than its footprint
    assert_sends(sends(forecast, 0, (OUT0, IN0), 2.0), [(OUT0, 1.2 + LAT, 1.2 + LAT + send_s)])
    forecast.started(1, Task(FORWARD, 0, 0), 2.0)  # the last stage's forward sends nothing
    forecast.started(1, Task(BACKWARD, 0, 0), 3.0)  # its backward goes back to stage 0's nic_in
    assert_sends(
        sends(forecast, 0, (OUT0, IN0), 3.2),
        [(OUT0, 1.2 + LAT, 1.2 + LAT + send_s), (IN0, 3.0 + LAT, 3.0 + LAT + send_s)],
    )
    forecast.started(0, Task(FORWARD, 1, 0), 4.0)
    forecast.started(0, Task(BACKWARD, 0, 0), 5.0)  # F0 drops out: the last ended and the running task only
    # Stage 1 asking until 5.6: stage 0's F1 (B0, the first stage's backward, sends nothing) and its next, F2 at
    # 5.0 + 0.5 (then B1 waits for stage 1's B1, after the asker); stage 1's own B0 on its nic_out.
    starts = [(link, start) for link, start, _ in sends(forecast, 1, (OUT1, IN1), 5.6)]
    assert starts == [(IN1, 4.0 + LAT), (IN1, 5.5 + LAT), (OUT1, 3.0 + LAT)]


def test_a_task_waits_for_its_inputs_by_hand() -> None:
    """Nothing started: stage 1's F0 waits for stage 0's F0 (ends at 0.5) to arrive, E = 22.4 us + A later, so it
    runs over [0.5 + E, 1 + E) and its B0 over [1 + E, 1.5 + E); stage 0's B0 (after F0 F1) waits for that
    gradient until 1.5 + 2 E (not 1.0 when F1 ends), and at the latest until 1.5 + 2 (22.4 us + 1.2 A)."""
    forecast = _forecast()
    assert forecast.inputs(1, 0) == ((0, 0, pytest.approx(E, rel=1e-12), pytest.approx(LAT + 1.2 * A, rel=1e-12)),)
    assert forecast.inputs(0, 0) == ()  # the first stage's forward has no input
    assert tuple(forecast.times(1, 0)) == pytest.approx((0.5 + E, 1.0 + E, 1.0 + LAT + 1.2 * A), rel=1e-12)
    assert tuple(forecast.times(0, 2)) == pytest.approx(
        (1.5 + 2 * E, 2.0 + 2 * E, 2.0 + 2 * (LAT + 1.2 * A)), rel=1e-12
    )


def test_a_long_task_is_told_of_every_send_before_its_end() -> None:
    """Stage 0 (F0 ends at 1.0) runs F1 B0 F2 B1 ... F7 B6 B7, 0.5 s each, each B after stage 1's B of its
    micro-batch arrives: F1 ends at 1.5, B0 waits until 2 + 2 E, so F2 ends at 3 + 2 E, F3 at 4 + 2 E; stage 1's
    F2 then waits for F2, so B2 arrives at 4 + 4 E, and so on. A stage-1 task lasting until 10 s is told of the
    sends of F0 ... F7 (plus the NIC latency each)."""
    forecast = _forecast()
    forecast.started(0, Task(FORWARD, 0, 0), 1.0)
    starts = [start for _, start, _ in sends(forecast, 1, (OUT1, IN1), 10.0)]
    ends = [1.0, 1.5, 3 + 2 * E, 4 + 2 * E, 5 + 4 * E, 6 + 4 * E, 7 + 6 * E, 8 + 6 * E]
    assert starts == pytest.approx([end + LAT for end in ends], rel=1e-12)


def test_an_op_level_task_may_end_late_or_as_early_as_its_phase_has() -> None:
    """Stage 0's F0 at op level, its footprint ending at 1.0: forecast to end in [1.0, 1.0 + OP_LEVEL_SLACK A),
    so its send to stage 1 may start up to 2 A later; it ends at 0.9, so the next op-level forward is forecast
    to end from 0.1 s before its footprint's end on; a replayed one ends as its footprint says."""
    forecast = _forecast()
    assert send_forecast.OP_LEVEL_SLACK == 2.0
    forecast.started(0, Task(FORWARD, 0, 0), 1.0, op_level=True)
    assert tuple(forecast.times(0, 0))[1:] == pytest.approx((1.0, 1.0 + 2 * A), rel=1e-12)
    assert_sends(sends(forecast, 1, (OUT1, IN1), 1.2), [(IN1, 1.0 + LAT, 1.0 + 2 * A + LAT + 1.2 * A)])
    assert tuple(forecast.times(0, 1))[1:] == pytest.approx((1.5, 1.5 + 2 * A), rel=1e-12)  # F1 after it
    forecast.ended(0, 0.9)
    assert forecast.early_s == {FORWARD: pytest.approx(0.1)}
    assert tuple(forecast.times(0, 0))[1:] == (0.9, 0.9)
    forecast.started(0, Task(FORWARD, 1, 0), 1.4, op_level=True)
    assert tuple(forecast.times(0, 1))[1:] == pytest.approx((1.3, 1.4 + 2 * A), rel=1e-12)
    forecast.ended(0, 1.45)  # later than its footprint: the early margin stays
    forecast.started(0, Task(BACKWARD, 0, 0), 2.0, op_level=True)  # another phase: nothing learnt yet
    assert tuple(forecast.times(0, 2))[1:] == pytest.approx((2.0, 2.0 + 2 * A), rel=1e-12)
    forecast.ended(0, 2.0)
    forecast.started(0, Task(FORWARD, 2, 0), 3.0)
    assert tuple(forecast.times(0, 3))[1:] == (3.0, 3.0)
    assert forecast.early_s == {FORWARD: pytest.approx(0.1), BACKWARD: 0.0}


def test_a_paired_tasks_two_sends_share_its_nic_out() -> None:
    """Interleaved 1F1B with EP overlap on PP 2: stage 0's F&B tasks whose forward (chunk 0 -> stage 1) and
    backward (chunk 1 -> stage 1's chunk 0) both leave over nic_out 0 are forecast at twice a send's time, a
    single send at once."""
    workload, cluster = _workload(2, 4, **SCHEDULES["ep-overlap"][2])
    forecast = SendForecast(Engine(workload, cluster, CAL).placement, lambda stage, task: 0.5)
    paired = [task for task in workload.stage_order(0) if task.paired is not None and task.paired[1] == 1]
    assert paired and all(len(workload.schedule.outputs(0, task)) == 2 for task in paired)
    links, send_s, alone_s = forecast.links(0, paired[0])
    assert links == (OUT0, IN1, OUT0, IN1)
    assert (send_s, alone_s) == pytest.approx((2 * 1.2 * A, 2 * A), rel=1e-12)
    single = Task(FORWARD, 0, 0)
    assert forecast.links(0, single) == ((OUT0, IN1), pytest.approx(1.2 * A, rel=1e-12), pytest.approx(A, rel=1e-12))


def test_dualpipev_turn_arrives_at_once() -> None:
    """DualPipeV on PP 2: the last stage's chunk-0 forward hands its output to its own chunk 1 inside the GPU
    (no NIC latency, no send); its other inputs cross nodes."""
    workload, cluster = _workload(2, 4, **SCHEDULES["dualpipev"][2])
    forecast = SendForecast(Engine(workload, cluster, CAL).placement, lambda stage, task: 0.5)
    order = workload.stage_order(1)
    turn = order.index(Task(FORWARD, 0, 1))
    (source, at, delay_s, latest_s) = forecast.inputs(1, turn)[0]
    assert (source, order[at], delay_s, latest_s) == (1, Task(FORWARD, 0, 0), 0.0, 0.0)
    assert forecast.inputs(1, order.index(Task(FORWARD, 0, 0)))[0][2] == pytest.approx(E, rel=1e-12)


def test_meets_by_hand() -> None:
    """Stage 0's F0 ends at 1.0: its send occupies nic_in 1 over [1.000005, 1.000139). A stage-1 task started at
    0.9 holding nic_in 1 over [0.9, 1.0) and [1.1, 1.2) misses it; one holding [1.0001, 1.2) meets it."""
    forecast = _forecast()
    forecast.started(0, Task(FORWARD, 0, 0), 1.0)
    assert not forecast.meets((OUT1, IN1), (((0.0, 0.5),), ((0.0, 0.1), (0.2, 0.3))), 0.9)
    assert forecast.meets((OUT1, IN1), (((0.0, 0.5),), ((0.0, 0.1), (0.1001, 0.3))), 0.9)
    assert not forecast.meets((OUT1, IN1), ((), ((0.0, 0.1),)), 0.9)  # before the send: no
    forecast.placement.dp_in_flight[IN1] = 1  # a DP bucket moving on nic_in 1: any span there meets it
    assert forecast.meets((OUT1, IN1), ((), ((0.0, 0.1),)), 0.9)
    assert not forecast.meets((OUT1, IN1), (((0.0, 0.1),), ()), 0.9)


def test_dp_buckets_in_flight_are_counted_while_they_move() -> None:
    """A 1 GB DP bucket at 9.4 GB/s effective moves over [0, 1 / 9.4) s: counted on both links meanwhile."""
    workload, cluster = _workload(2, 8)
    placement = Engine(workload, cluster, CAL).placement
    env: simpy.Environment = placement.env
    placement.nic_log = FlowLog(env)
    place = Place(0, 1, 0)
    done = placement.dp_transfer(place, DpBucket("dp-grads", 0), placement.dp_links(place), 1e9)
    assert placement.dp_in_flight == {OUT1: 1, IN1: 1}
    env.run(until=0.5 / 9.4)
    assert placement.dp_in_flight == {OUT1: 1, IN1: 1} and not done.processed
    env.run()
    assert placement.dp_in_flight == {OUT1: 0, IN1: 0} and done.processed
    assert placement.nic_log.unowned[OUT1] == [pytest.approx((0.0, 1 / 9.4))]


def test_forecast_keeps_the_first_run_off_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Interleaved with EP overlap on 3 GB/s NICs: all replayed, the first run conflicts past MAX_CONFLICT_FRACTION
    and the step goes to op level; seeded by the forecast it runs once, replaying some tasks, equal to the
    op-level run. (At 10 GB/s the combined 1F1B's one comm stream, workloads/graph/combined_1f1b.py, keeps the blind
    run's conflicts under the fraction.)"""
    workload, cluster = _workload(2, 4, **SCHEDULES["ep-overlap-3GBps"][2])
    monkeypatch.setattr(nic_replay, "FORECAST", False)
    (blind,) = Engine(workload, cluster, CAL).run().nic_replay
    assert blind.runs == 2 and blind.forced is None
    monkeypatch.setattr(nic_replay, "FORECAST", True)
    result = Engine(workload, cluster, CAL).run()
    (stats,) = result.nic_replay
    assert stats.runs == 1 and stats.forced is not None and 0 < len(stats.forced) < stats.nic_tasks
    _assert_same(result, Engine(workload, cluster, CAL, memoize=False).run())


@pytest.mark.parametrize("start_at", ["inside", "after"])
def test_a_forecast_run_stops_at_its_first_conflict(start_at: str) -> None:
    """Stage 0's first forward replayed at t0 = 0 (nothing is forecast to meet it); a PP send to stage 1 started
    halfway through its first NIC span stops the run as it lands, naming nic_out 0 and the send's span; one
    started when its last span ends lets the run finish."""
    engine, _, _, send_at = first_forward_and_send(start_at)
    timer = engine.timer
    if start_at == "after":
        engine.env.run()
        assert timer.conflicts() == set() and timer.foreseen == set()
        return
    with pytest.raises(nic_replay.ReplayConflict) as stopped:
        engine.env.run()
    conflict = stopped.value
    assert OUT0 in conflict.links and conflict.start_s == pytest.approx(send_at) and conflict.end_s > conflict.start_s
    assert conflict.met == {(Place(0, 0, 0), Task(FORWARD, 0, 0))}
    assert timer.foreseen == set()


def test_a_seeded_run_has_no_forecast() -> None:
    """A re-run or the steady shortcut's longer run starts from a run's conflicts or needed tasks: no forecast."""
    workload, cluster = _workload(2, 8)
    seed = frozenset({(Place(0, 0, 0), Task(FORWARD, 0, 0))})
    assert Engine(workload, cluster, CAL).timer.forecast is not None
    assert Engine(workload, cluster, CAL, forced=seed).timer.forecast is None
    assert Engine(workload, cluster, CAL, forced=None).timer.forecast is None


def test_dualpipev_runs_once() -> None:
    """DualPipeV on PP 2 (F&B tasks with two sends, a turn inside the GPU): the first forecast run ends without a
    conflict (it stopped at 16 of 31 tasks when a paired task's sends were forecast at one send's time and peers
    never waited), replaying some tasks, equal to the op-level run."""
    workload, cluster = _workload(2, 4, **SCHEDULES["dualpipev"][2])
    result = Engine(workload, cluster, CAL).run()
    (stats,) = result.nic_replay
    assert stats.runs == 1 and stats.forced is not None and 0 < len(stats.forced) < stats.nic_tasks
    _assert_same(result, Engine(workload, cluster, CAL, memoize=False).run())


@pytest.mark.parametrize("name", ["1f1b-pp4", "ep-overlap-dw", "dualpipev"])
def test_forgetting_only_what_moved_forecasts_as_forgetting_all(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a start or end the forecast drops only what was computed from that task; dropping every forecast
    instead (each recomputed from the tasks told so far) forces the same tasks in every run of the step."""
    pp, micro_batches, changes = SCHEDULES[name]
    workload, cluster = _workload(pp, micro_batches, **changes)
    (kept,) = Engine(workload, cluster, CAL).run().nic_replay
    forget = SendForecast._forget

    def forget_all(self: SendForecast, stage: int, index: int) -> None:
        forget(self, stage, index)
        self._times.clear()
        self._users.clear()
        self._sends = [None] * len(self._sends)

    monkeypatch.setattr(send_forecast, "KEEP", False)  # _forget is the path without KEEP
    monkeypatch.setattr(SendForecast, "_forget", forget_all)
    (cleared,) = Engine(workload, cluster, CAL).run().nic_replay
    assert (kept.runs, kept.forced) == (cleared.runs, cleared.forced) and kept.forced


@pytest.mark.parametrize("name", ["1f1b-pp4", "interleaved", "ep-overlap-dw", "dualpipev"])
def test_kept_forecasts_equal_recomputed_ones(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """KEEP: after every start and end over a run each forecast kept equals its recomputation from what it reads
    (the fixpoint SendForecast._changed keeps), forecasts kept as they were by a start or end and, on 1F1B and
    DualPipeV, some moved (re-evaluated); dropping and recomputing instead (KEEP off) answers every ``meets`` the same and forces the same
    tasks."""
    pp, micro_batches, changes = SCHEDULES[name]
    workload, cluster = _workload(pp, micro_batches, **changes)
    answers: dict[bool, list[bool]] = {True: [], False: []}
    seen = {"kept": 0, "moved": 0}
    started, ended, meets = SendForecast.started, SendForecast.ended, SendForecast.meets

    def check(forecast: SendForecast) -> None:
        for (stage, index), kept in forecast._times.items():
            assert forecast._compute(stage, index, register=False) == kept

    def count(self: SendForecast, before: dict) -> None:
        """Forecasts a start or end left as they were, and ones it moved."""
        for key, forecast in before.items():
            if key in self._times:
                seen["kept" if self._times[key] == forecast else "moved"] += 1
        check(self)

    def checked_started(self: SendForecast, stage: int, task: Task, end_s: float, op_level: bool = False) -> None:
        before = dict(self._times)
        started(self, stage, task, end_s, op_level)
        count(self, before)

    def checked_ended(self: SendForecast, stage: int, end_s: float) -> None:
        before = dict(self._times)
        ended(self, stage, end_s)
        count(self, before)

    def recorded_meets(self: SendForecast, *args) -> bool:
        answers[send_forecast.KEEP].append(meets(self, *args))
        return answers[send_forecast.KEEP][-1]

    monkeypatch.setattr(SendForecast, "meets", recorded_meets)
    monkeypatch.setattr(SendForecast, "started", checked_started)
    monkeypatch.setattr(SendForecast, "ended", checked_ended)
    (kept,) = Engine(workload, cluster, CAL).run().nic_replay
    assert seen["kept"] > 0 and (seen["moved"] > 0) == (name in ("1f1b-pp4", "dualpipev"))  # some start off forecast
    monkeypatch.setattr(send_forecast, "KEEP", False)
    monkeypatch.setattr(SendForecast, "started", started)
    monkeypatch.setattr(SendForecast, "ended", ended)
    (recomputed,) = Engine(workload, cluster, CAL).run().nic_replay
    assert answers[True] == answers[False] and True in answers[True]
    assert (kept.runs, kept.forced) == (recomputed.runs, recomputed.forced)


@pytest.mark.parametrize("name", ["dp4", "ep-overlap-3GBps", "dualpipev"])
def test_following_sends_as_when_every_next_task_is_forecast(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over a run, at every ``meets``, each stage's following sends that leave before the asker's end are those of
    forecasting the next task and every later one that starts before it (what stage_sends did before it stopped
    at the first task whose sends cannot leave in time); some stages have such sends, some none."""
    pp, micro_batches, changes = SCHEDULES[name]
    workload, cluster = _workload(pp, micro_batches, **changes)
    meets, checked = SendForecast.meets, []

    def every_next(forecast: SendForecast, stage: int, until_s: float) -> list:
        found, order, started = [], forecast.order(stage), len(forecast.ends(stage))
        for index in range(started, len(order)):
            times = forecast.times(stage, index)
            if index > started and times.start_s >= until_s:
                break
            found.extend(send for send in forecast._of(stage, index, times) if send[1] < until_s)
        return found

    def compared(self: SendForecast, links, spans, start_s: float) -> bool:
        until_s = start_s + max((spans_of[-1][1] for spans_of in spans if spans_of), default=0.0)
        for sender in self.senders(links[0][1]):
            _, following = self.stage_sends(sender, until_s)
            reference = every_next(self, sender, until_s)
            assert [send for send in following if send[1] < until_s] == reference
            checked.append(bool(reference))
        return meets(self, links, spans, start_s)

    monkeypatch.setattr(SendForecast, "meets", compared)
    Engine(workload, cluster, CAL).run()
    assert True in checked and False in checked
