"""Tests for the lower bound on a step's time (simulator/report/bounds.py) that ``moesim search`` prunes with."""

from __future__ import annotations

from functools import cache

import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.search.dispatch_choices import MEGATRON_DISPATCHERS, point_dispatchers
from experiments.search.points import Point, _resolved, bound_point
from experiments.search.search import candidates
from experiments.search.sweep import sweep_row, to_point
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import Engine, optimizer_s
from simulator.engine.faults import StageFault
from simulator.engine.timer import CostCache, MemoTimer
from simulator.report import bounds
from simulator.report.bounds import ROUNDING, replayed_step_s, step_lower_bound_s
from simulator.report.simulate import lower_bound_s, prepare, simulate
from topologies.errors import ConfigError
from workloads.inputs.yaml_files import load_model
from workloads.schedules.base import BACKWARD, FORWARD
from workloads.schedules.pipeline_tasks import TaskKey
from workloads.specs.layouts import layout_preset

# One worker runs them all: points() and classes() are built once (under xdist's load groups, 25.5 CPU-s -> 19.9).
pytestmark = pytest.mark.xdist_group("bounds")

# Two small searches: few micro-batches (full runs, deep bubbles) and more (steady-state shortcut), in node
# and cross-node EP (op-level tasks on the NIC), every schedule of the wide space.
JOBS = (
    {"model": "mixtral-8x7b", "gpus": 16, "global_batch": 16, "seq_len": 2048},
    {"model": "mixtral-8x7b", "gpus": 32, "global_batch": 128, "seq_len": 2048},
)


@cache
def points(job: int) -> list[dict]:
    spec = JOBS[job]
    found, _ = candidates(spec["model"], spec["gpus"], global_batch=spec["global_batch"], seq_len=spec["seq_len"])
    return found


# 15 drawn points (25 until the default run neared its 150 s on 2 cores): the class tests below add a point of every
# (schedule, EP overlap, NIC, long step) class
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.integers(0, len(JOBS) - 1), st.integers(0, 10**6))
def test_bound_never_exceeds_the_simulated_step(job: int, pick: int) -> None:
    """Over layouts of a search (every schedule, in-node and cross-node EP), the bound is at most the step."""
    params = points(job)[pick % len(points(job))]
    row = sweep_row(params)
    bound = bound_point(to_point(params))
    assert not row["error"] and bound is not None
    assert 0 < bound <= float(row["step_time_s"]), params


def test_bound_is_the_step_without_bubble_or_dp() -> None:
    """One stage and one replica (8 GPUs, n = 8, PP 1): the step is its 4 micro-batches' F and B back to back
    and the optimizer step, nothing else, so the bound is the simulated step to float rounding, and equal
    to 4 (F + B) + Adam computed from the tasks timed alone."""
    args = {"cluster": "h800", "global_batch": 4, "seq_len": 2048, "micro_batch": 1, "allow_oom": True}
    layout = layout_preset("megascale-moe").with_(pp=1, intra_size=8)
    report = simulate("mixtral-8x7b", layout, 8, **args)
    assert (report.pp, report.dp, report.micro_batches) == (1, 1, 4)
    workload, cluster, _ = prepare("mixtral-8x7b", layout, 8, "h800", 4, 2048, 1, True)
    timer = MemoTimer(simpy.Environment(), CostCache(workload, cluster.gpu, DEFAULT_CALIBRATION), [StageFault()])
    block = workload.block_key(0)
    forward_s = timer.task_timing(TaskKey(FORWARD, (block,))).duration_s
    backward_s = timer.task_timing(TaskKey(BACKWARD, (block,))).duration_s
    by_hand = 4 * (forward_s + backward_s) + optimizer_s(workload, 0, cluster.gpu, DEFAULT_CALIBRATION)
    bound = lower_bound_s("mixtral-8x7b", layout, 8, **args)
    assert bound == step_lower_bound_s(workload, cluster, DEFAULT_CALIBRATION, timer)
    assert abs(bound - by_hand * (1 - ROUNDING)) <= 1e-15 * by_hand
    assert bound <= report.step_time_s and report.step_time_s - bound <= 1e-9 * report.step_time_s


def test_no_bound_for_what_it_does_not_take() -> None:
    """A point that sets a simulate() keyword the bound does not model (op level) gets none: it always runs;
    an invalid one too."""
    kwargs, two = {"global_batch": 16, "seq_len": 2048}, {"pp": 2}
    assert bound_point(Point("mixtral-8x7b", "megascale-moe", 16, "h800", kwargs, two)) is not None
    assert bound_point(Point("mixtral-8x7b", "megascale-moe", 16, "h800", {**kwargs, "memoize": False}, two)) is None
    assert bound_point(Point("mixtral-8x7b", "megascale-moe", 16, "h800", kwargs, {"pp": 3})) is None


def _workload(params: dict):
    """The prepared workload and cluster of a search point (as ``simulate`` builds them)."""
    point = to_point(params)
    layout, cluster = _resolved(point)
    kwargs = point.simulate_kwargs
    workload, cluster, _ = prepare(
        point.model, layout, None, cluster, kwargs["global_batch"], kwargs["seq_len"], kwargs.get("micro_batch"), False
    )
    return workload, cluster


@cache
def classes() -> dict[tuple, list[dict]]:
    """The second search's points by what the replay's validity turns on: the schedule, EP overlap, tasks on the
    NIC (op level in the step), and a step long enough for the steady shortcut (more than 32 micro-batches); each
    class's points from the fewest micro-batches to the most."""
    grouped: dict[tuple, list[tuple[int, int, dict]]] = {}
    for order, params in enumerate(points(1)[::3]):
        workload, _ = _workload(params)
        key = (params["schedule"], params["ep_overlap"], workload.tasks_use_nic, workload.micro_batches > 32)
        grouped.setdefault(key, []).append((workload.micro_batches, order, params))
    return {key: [params for *_, params in sorted(group, key=lambda item: item[:2])] for key, group in grouped.items()}


def test_replay_never_exceeds_the_full_run_of_any_schedule() -> None:
    """The replayed step (every task alone, every PP input arriving as it is sent) is at most the engine's full run
    (no steady shortcut), for a point of each schedule (1F1B, interleaved, ZB1P, DualPipe, DualPipeV), with and
    without EP overlap, with tasks on the NIC and off it, short steps and long."""
    seen = classes()
    assert {key[0] for key in seen} >= {"1f1b", "interleaved", "zb1p", "dualpipe", "dualpipev"}
    assert any(key[1] for key in seen) and any(key[2] for key in seen)
    for key, group in sorted(seen.items(), key=str):
        params = group[0]  # the class's shortest step: a full run costs in proportion
        workload, cluster = _workload(params)
        full_s = Engine(workload, cluster, DEFAULT_CALIBRATION).run().step_time_s
        replayed_s = replayed_step_s(workload, cluster, DEFAULT_CALIBRATION)
        assert 0 < replayed_s * (1 - ROUNDING) <= full_s, (key, params, replayed_s, full_s)


def test_bound_never_exceeds_the_reported_step_of_any_schedule() -> None:
    """The bound is at most the step ``simulate`` reports (the steady shortcut's, on its bounded line where it
    takes it) for another point of each class."""
    for key, group in sorted(classes().items(), key=str):
        params = group[-1]
        row = sweep_row(params)
        bound = bound_point(to_point(params))
        assert not row["error"] and bound is not None
        assert 0 < bound <= float(row["step_time_s"]), (key, params)


def test_bound_holds_for_every_token_dispatcher() -> None:
    """Megatron-Core's token dispatchers (all-to-all, all-gather, DeepEP, HybridEP) on points whose EP group takes
    them, in node and across nodes, short steps (run in full) and long: the bound is at most the reported step, the
    replay at most the full run. One point of each (dispatcher, tasks on the NIC, short) kind."""
    model = load_model(JOBS[1]["model"])
    ran: set[tuple[str, bool, bool]] = set()
    for params in points(1)[::67]:
        for dispatcher in point_dispatchers(MEGATRON_DISPATCHERS, model, 8, params):
            varied = {**params, "token_dispatcher": dispatcher}
            try:
                workload, cluster = _workload(varied)
            except ConfigError:
                continue  # e.g. a dispatcher the base layout's other settings refuse
            short = workload.micro_batches <= 16  # short enough to run in full
            kind = (dispatcher, workload.tasks_use_nic, short)
            if kind in ran:
                continue
            row = sweep_row(varied)
            if row["error"]:
                continue
            bound = bound_point(to_point(varied))
            assert bound is not None and 0 < bound <= float(row["step_time_s"]), varied
            if short:
                full_s = Engine(workload, cluster, DEFAULT_CALIBRATION).run().step_time_s
                assert replayed_step_s(workload, cluster, DEFAULT_CALIBRATION) * (1 - ROUNDING) <= full_s, varied
            ran.add(kind)
    assert len(ran) == 4 * len(MEGATRON_DISPATCHERS), sorted(ran)


def test_a_cut_replay_is_a_weaker_bound(monkeypatch) -> None:
    """Orders cut after a few tasks a stage (REPLAYED_PER_STAGE; long steps of many stages): the rest of each stage's
    tasks count back to back, so the bound is at most the whole replay's, and still positive, for a point of each
    schedule class."""
    whole = {key: replayed_step_s(*_workload(group[0]), DEFAULT_CALIBRATION) for key, group in classes().items()}
    monkeypatch.setattr(bounds, "REPLAYED_PER_STAGE", 6)
    bounds.replay.cache_clear()
    try:
        for key, group in classes().items():
            cut_s = replayed_step_s(*_workload(group[0]), DEFAULT_CALIBRATION)
            assert 0 < cut_s <= whole[key] * (1 + ROUNDING), key
    finally:
        bounds.replay.cache_clear()
