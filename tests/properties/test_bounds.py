"""Tests for the lower bound on a step's time (simulator/report/bounds.py) that ``moesim search`` prunes with."""

from __future__ import annotations

from functools import cache

import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.search.points import Point, bound_point
from experiments.search.search import candidates
from experiments.search.sweep import sweep_row, to_point
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import optimizer_s
from simulator.engine.faults import StageFault
from simulator.engine.timer import CostCache, MemoTimer
from simulator.report.bounds import ROUNDING, step_lower_bound_s
from simulator.report.simulate import lower_bound_s, prepare, simulate
from workloads.schedules.base import BACKWARD, FORWARD
from workloads.schedules.pipeline_tasks import TaskKey
from workloads.specs.layouts import layout_preset

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


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
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
