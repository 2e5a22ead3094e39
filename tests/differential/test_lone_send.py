"""A PP send sure to run alone (simulator/fast/lone_send.py): its exact end by hand (pending, with a flow in flight on
a receiver's NIC in), the cases it is not sure of, fewer forced tasks than the SEND_SLOWDOWN window with the step
as at op level, and a wrong answer caught by the verification (the step still equals the op-level run)."""

from __future__ import annotations

import pytest

from simulator.engine import engine
from simulator.fast import nic_replay
from simulator.fast import send_forecast
from simulator.engine.engine import Engine
from simulator.fast.lone_send import lone_end
from simulator.fast.send_forecast import SendForecast
from tests.differential.test_nic_replay import CAL, SCHEDULES, _assert_same, _workload
from workloads.schedules.base import FORWARD, Task

OUT0, IN0, OUT1, IN1 = ("nic_out", 0), ("nic_in", 0), ("nic_out", 1), ("nic_in", 1)
NBYTES = 1048576  # a PP send: 1 x 4096 / 8 tokens x 1024 x 2 B
CAPACITY_BPS = 9.4e9  # 10 GB/s x 0.94
A = NBYTES / CAPACITY_BPS  # a PP send alone
LAT = 22.4e-6  # a send over the NIC: NCCL's fixed 8.4 us and one network step, 14 us (topologies.cluster)


def _forecast(first_flow_s: float) -> SendForecast:
    """1F1B on PP 2 (stage 0 runs F0 F1 B0 ..., stage 1 F0 B0 F1 ...), every task 0.5 s alone, its first NIC flow
    ``first_flow_s`` after its start; stage 0's F0 replayed from 0.5 s, ending at 1.0 (now: 0)."""
    workload, cluster = _workload(2, 8)
    forecast = SendForecast(Engine(workload, cluster, CAL).placement, lambda s, t: 0.5, lambda s, t: first_flow_s)
    assert forecast.placement.network.capacities_Bps[OUT0] == pytest.approx(CAPACITY_BPS, rel=1e-12)
    forecast.started(0, Task(FORWARD, 0, 0), 1.0)
    return forecast


def test_lone_end_by_hand() -> None:
    """F0's send to stage 1 leaves at 1.0 + 22.4 us, alone on nic_out 0 and nic_in 1: it ends A later. Stage 0's next
    task starts at 1.0 and its first NIC flow 0.6 s later; stage 1 asks (its F0, 0.5 s, replayed if it meets
    nothing) and its next task's flow begins 0.5 + 0.6 s from now: both after the send."""
    forecast = _forecast(0.6)
    assert lone_end(forecast, 0, 0, 1) == pytest.approx(1.0 + LAT + A, rel=1e-12)
    # A 10 MB flow in flight on stage 1's NIC (out and in) may still be there: the send gets half of nic_in 1.
    forecast.placement.network.transfer((OUT1, IN1), 10e6)
    assert lone_end(forecast, 0, 0, 1) == pytest.approx(1.0 + LAT + 2 * A, rel=1e-12)


def test_lone_end_not_sure() -> None:
    """None where a flow may join the send: a stage's next NIC flow before its end (first flows 0.1 s in: stage 1's
    at 0.5 + 0.1), a DP bucket in flight on its links, an op-level task running on the receiver."""
    assert lone_end(_forecast(0.1), 0, 0, 1) is None
    forecast = _forecast(0.6)
    forecast.placement.dp_in_flight[IN1] = 1
    assert lone_end(forecast, 0, 0, 1) is None
    forecast = _forecast(0.6)
    forecast.started(1, Task(FORWARD, 0, 0), 2.0, op_level=True)
    assert lone_end(forecast, 0, 0, 0) is None


def test_lone_sends_force_fewer_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Interleaved with EP overlap: with sends sure to run alone at their exact span the first run forces fewer
    tasks than with every started task's send at SEND_SLOWDOWN times its time alone, in one run each, and both
    steps equal the op-level run."""
    workload, cluster = _workload(2, 4, **SCHEDULES["ep-overlap"][2])
    reference = Engine(workload, cluster, CAL, memoize=False).run()
    lone = Engine(workload, cluster, CAL).run()
    monkeypatch.setattr(send_forecast, "LONE", False)
    margin = Engine(workload, cluster, CAL).run()
    (lone_stats,), (margin_stats,) = lone.nic_replay, margin.nic_replay
    assert lone_stats.runs == margin_stats.runs == 1
    assert 0 < len(lone_stats.forced) < len(margin_stats.forced)
    _assert_same(lone, reference)
    _assert_same(margin, reference)


def test_a_wrong_lone_end_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lone_end that says every send met has landed already replays tasks a send does meet: the run stops at
    the conflict and runs again (retries, or at op level), and the step still equals the op-level run."""
    workload, cluster = _workload(2, 4, **SCHEDULES["ep-overlap"][2])
    reference = Engine(workload, cluster, CAL, memoize=False).run()
    stops: list[nic_replay.ReplayConflict] = []
    after_conflict = nic_replay.after_conflict

    def noted(timer, conflict, stopped_tasks):
        stops.append(conflict)
        return after_conflict(timer, conflict, stopped_tasks)

    monkeypatch.setattr(send_forecast, "lone_end", lambda forecast, *_: forecast.placement.env.now)
    monkeypatch.setattr(engine, "after_conflict", noted)
    wrong = Engine(workload, cluster, CAL).run()
    (stats,) = wrong.nic_replay
    assert stops and stats.runs >= 2
    _assert_same(wrong, reference)
