"""A forecast run stopped at a conflict runs again with the tasks the send met and their twins forced
(simulator/fast/nic_replay.py: after_conflict, twins), within FORECAST_BUDGET: by hand on 1F1B over two stages, and
against the op-level run (``memoize=False``) to 1e-9 where the retry is taken, where the budget refuses it,
and with CP across nodes (its ring flows on the NIC)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.fast import nic_replay
from simulator.engine.engine import Engine
from simulator.fast.nic_replay import ReplayConflict, after_conflict, twins
from simulator.engine.ranks import Place
from tests.differential.test_nic_replay import CAL, SMALL, _assert_same, _workload
from topologies.cluster import cluster_preset
from workloads.specs.layouts import layout_preset
from workloads.schedules.base import BACKWARD, FORWARD, Task
from workloads.graph.step import StepWorkload

STAGE0, STAGE1 = Place(0, 0, 0), Place(0, 1, 0)


def test_twins_by_hand() -> None:
    """1F1B on PP 2 over 8 micro-batches: stage 0's F5 is followed by F6 and F7 of its chunk; stage 1's B6 by B7."""
    workload, _ = _workload(2, 8)
    assert twins(workload, [(STAGE0, Task(FORWARD, 5, 0))]) == {(STAGE0, Task(FORWARD, m, 0)) for m in (5, 6, 7)}
    met = [(STAGE1, Task(BACKWARD, 6, 0)), (STAGE0, Task(FORWARD, 7, 0))]
    assert twins(workload, met) == {*met, (STAGE1, Task(BACKWARD, 7, 0))}
    assert twins(workload, []) == frozenset()


def test_after_conflict_by_hand() -> None:
    """32 tasks in the step (2 stages x 8 micro-batches x F and B): FORECAST_BUDGET 0.15 allows 4.8 tasks
    started by the stopped runs, so 4 retry with the met task's twins added to the seed, 5 go to op level; a
    step already at op level stays there."""
    workload, cluster = _workload(2, 8)
    assert nic_replay.FORECAST_BUDGET == 0.15
    met = frozenset({(STAGE0, Task(FORWARD, 6, 0))})
    conflict = ReplayConflict((("nic_out", 0), ("nic_in", 1)), 1.0, 2.0, met)
    assert (conflict.links, conflict.start_s, conflict.end_s, conflict.met) == (
        (("nic_out", 0), ("nic_in", 1)), 1.0, 2.0, met
    )  # fmt: skip
    timer = Engine(workload, cluster, CAL).timer
    expected = frozenset({(STAGE0, Task(FORWARD, 6, 0)), (STAGE0, Task(FORWARD, 7, 0))})
    assert after_conflict(timer, conflict, 4) == (expected, True)
    assert after_conflict(timer, conflict, 5) == (None, False)
    seed = frozenset({(STAGE1, Task(BACKWARD, 0, 0))})
    seeded = Engine(workload, cluster, CAL, forced=seed, forecast=True).timer
    assert seeded.forecast is not None  # a retry keeps the forecast on top of its seed
    assert after_conflict(seeded, conflict, 0) == (seed | expected, True)
    assert after_conflict(Engine(workload, cluster, CAL, forced=None).timer, conflict, 0) == (None, False)


# Steps whose first forecast run stops at a conflict (test_nic_replay's 1F1B on PP 4 and interleaved schedules,
# at NIC rates where a forecast send meets a flow it did not foresee; since stop 36's collective latencies the
# default 10 GB/s ones run through).
CONFLICTS = {
    "1f1b-pp4-12GBps": (4, 8, {"nic_Bps": 12e9}),
    "interleaved-5GBps": (2, 4, {"schedule": "interleaved", "virtual_stages": 2, "nic_Bps": 5e9}),
}


@pytest.mark.parametrize(("name", "budget"), [("1f1b-pp4-12GBps", 0.15), ("interleaved-5GBps", 1.0)])
def test_a_retried_forecast_run_equals_op_level(name: str, budget: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each first forecast run stops at a conflict (interleaved's past the default budget, so allowed all here);
    the retry, the met task and its twins forced, runs without conflict, replaying some tasks, and equals the
    op-level run."""
    monkeypatch.setattr(nic_replay, "FORECAST_BUDGET", budget)
    pp, micro_batches, changes = CONFLICTS[name]
    workload, cluster = _workload(pp, micro_batches, **changes)
    stops: list[ReplayConflict] = []
    real = Engine._run_once

    def counted(engine: Engine):
        try:
            return real(engine)
        except ReplayConflict as conflict:
            stops.append(conflict)
            raise

    monkeypatch.setattr(Engine, "_run_once", counted)
    replayed = Engine(workload, cluster, CAL).run()
    (stats,) = replayed.nic_replay
    assert len(stops) == 1 and stats.runs == 2
    assert stats.forced is not None and twins(workload, stops[0].met) <= stats.forced
    assert len(stats.forced) < stats.nic_tasks
    _assert_same(replayed, Engine(workload, cluster, CAL, memoize=False).run())


def test_no_budget_sends_a_stopped_step_to_op_level(monkeypatch: pytest.MonkeyPatch) -> None:
    """1F1B on PP 4 with FORECAST_BUDGET 0: its stopped first run is followed by the op-level run, still exact."""
    monkeypatch.setattr(nic_replay, "FORECAST_BUDGET", 0.0)
    pp, micro_batches, changes = CONFLICTS["1f1b-pp4-12GBps"]
    workload, cluster = _workload(pp, micro_batches, **changes)
    replayed = Engine(workload, cluster, CAL).run()
    (stats,) = replayed.nic_replay
    assert stats.runs == 2 and stats.forced is None
    _assert_same(replayed, Engine(workload, cluster, CAL, memoize=False).run())


@pytest.mark.parametrize("changes", [{}, {"schedule": "interleaved", "virtual_stages": 2}], ids=["1f1b", "vp2"])
def test_cp_across_nodes_equals_op_level(changes: dict) -> None:
    """CP 2 over two 8-GPU nodes per stage (EP 8 inside a node): the CP ring's flows are a task's own on the
    NIC, beside PP sends and DP buckets; the replayed step equals the op-level run."""
    layout = layout_preset("megascale-moe").with_(pp=2, micro_batch=1, cp=2, intra_size=8, ep=8, **changes)
    workload = StepWorkload(SMALL, layout, 32, 8, 16, 8192)
    cluster = replace(cluster_preset("h100", 32), nic_bandwidth_Bps=10e9)
    engine = Engine(workload, cluster, CAL)
    assert workload.tasks_use_nic and engine.nic_replay
    replayed = engine.run()
    (stats,) = replayed.nic_replay
    assert stats.forced is not None and stats.nic_tasks == len(replayed.stages) * len(replayed.stages[0].tasks)
    _assert_same(replayed, Engine(workload, cluster, CAL, memoize=False).run())
