"""Differential checks of the engine: a step with a fast path on (op level, the steady shortcut) against the same
step with it off."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from simulator.engine.engine import Engine, EngineResult
from simulator.fast.steady import fields_of
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload

STAGE_FIELDS = ("busy_s", "pipeline_end_s", "end_s", "pp_wait_s", "dp_exposed_s", "compute_busy_s")


def run_op_level(case: tuple[StepWorkload, int]) -> tuple[EngineResult, int]:
    """The step of ``(workload, gpus)`` on H800s with every task at op level, and the simpy events it scheduled."""
    workload, gpus = case
    engine = Engine(workload, cluster_preset("h800", gpus), memoize=False)
    return engine.run(), next(engine.env._eid)


def assert_same_fields(mine: EngineResult, reference: EngineResult) -> None:
    """Every additive field of two results (steady.fields_of: per stage, group, link and phase) to 1e-9."""
    theirs = fields_of(reference)
    assert fields_of(mine).keys() == theirs.keys()
    for name, value in fields_of(mine).items():
        assert value == pytest.approx(theirs[name], rel=1e-9, abs=1e-15), name


def assert_steps_match(fast: EngineResult, slow: EngineResult) -> None:
    """Step time, bytes, every stage's task spans and StageLog numbers agree to 1e-9."""
    assert fast.step_time_s == pytest.approx(slow.step_time_s, rel=1e-9)
    assert fast.network_bytes == pytest.approx(slow.network_bytes, rel=1e-12)
    for fast_log, slow_log in zip(fast.stages, slow.stages, strict=True):
        assert [task for task, _, _ in fast_log.tasks] == [task for task, _, _ in slow_log.tasks]
        for (_, begin, end), (_, ref_begin, ref_end) in zip(fast_log.tasks, slow_log.tasks):
            assert (begin, end) == pytest.approx((ref_begin, ref_end), rel=1e-9, abs=1e-12)
        for name in STAGE_FIELDS:
            assert getattr(fast_log, name) == pytest.approx(getattr(slow_log, name), rel=1e-9, abs=1e-12), name
        assert fast_log.model_flops == pytest.approx(slow_log.model_flops, rel=1e-12)
        assert fast_log.exposed_comm_s == pytest.approx(slow_log.exposed_comm_s, rel=1e-9, abs=1e-12)


def assert_fast_path_exact_and_cheaper(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType, switch: str, case: Callable[[], tuple[StepWorkload, int]]
) -> None:
    """The step of ``case`` with ``module.switch`` on schedules fewer simpy events than with it off, and matches it."""
    fast, fast_events = run_op_level(case())
    monkeypatch.setattr(module, switch, False)
    slow, slow_events = run_op_level(case())
    assert fast_events < slow_events
    assert_steps_match(fast, slow)
