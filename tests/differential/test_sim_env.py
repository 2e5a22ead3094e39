"""simulator/engine/sim_env.py: the engine's environment takes simpy's event steps, in simpy's order.

A tiny scenario with a hand-computed timeline on both environments (same log, same event ids), simpy's
failure and ``until`` rules, and whole steps (memoized, op level, NIC replay with the steady shortcut) equal
bit for bit on ``Env`` and on ``simpy.Environment`` (``sim_env.FAST`` off)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import simpy

from simulator.engine import sim_env
from simulator.engine.engine import Engine, EngineResult
from simulator.engine.sim_env import Env
from simulator.fast.steady import run_step
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec, model_preset


def _scenario(env: simpy.Environment) -> list[tuple[float, str, int]]:
    """Two processes: ``a`` waits 1.5, signals ``b`` (waiting for it), sets a timeout of 0, waits 0.25; ``b``
    then waits 2; a callback on a timeout of 1.5 created before both; ties at 1.5 go in scheduling order."""
    log: list[tuple[float, str, int]] = []
    signal = env.event()

    def a():
        yield env.timeout(1.5)
        log.append((env.now, "a signals", len(env._queue)))
        signal.succeed("go")
        env.timeout(0).callbacks.append(lambda _e: log.append((env.now, "zero", len(env._queue))))
        yield env.timeout(0.25)
        log.append((env.now, "a done", len(env._queue)))

    def b():
        value = yield signal
        log.append((env.now, f"b got {value}", len(env._queue)))
        yield env.timeout(2)
        log.append((env.now, "b done", len(env._queue)))

    env.timeout(1.5).callbacks.append(lambda _e: log.append((env.now, "tick", len(env._queue))))
    env.process(a())
    env.process(b())
    env.run()
    log.append((env.now, "end", next(env._eid)))
    return log


def test_same_timeline_and_event_ids_as_simpy() -> None:
    # Events: the tick (id 0), a's and b's starts (1, 2), a's 1.5 (3), the signal (4), the zero timeout (5), a's
    # 0.25 (6), b's 2 (7), a's end (8), b's end (9). The log's third number: events queued when it is written.
    expected = [
        (1.5, "tick", 1),  # the tick's timeout was scheduled first: it fires first at 1.5; a's is left
        (1.5, "a signals", 0),
        (1.5, "b got go", 2),  # the signal was scheduled before the zero timeout; a's 0.25 is queued too
        (1.5, "zero", 2),  # a's 0.25 and b's 2 are queued
        (1.75, "a done", 1),
        (3.5, "b done", 0),
        (3.5, "end", 10),  # 10 event ids taken in all, from the same counter as simpy's
    ]
    assert _scenario(Env()) == expected
    assert _scenario(simpy.Environment()) == expected


def test_failures_negative_delays_and_until_as_simpy() -> None:
    for env in (Env(), simpy.Environment()):
        failed = env.event()
        failed.fail(ValueError("lost"))
        with pytest.raises(ValueError, match="lost"):
            env.run()
        with pytest.raises(ValueError, match="Negative delay"):
            env.timeout(-1)
        env.timeout(5.0)
        assert env.run(until=2.0) is None
        assert env.now == 2.0
        done = env.timeout(1.0, value="v")
        assert env.run(until=done) == "v"
        assert env.now == 3.0
        env.step()  # the until event, put back at 3.0 by simpy's StopSimulation
        assert env.now == 3.0
        env.step()  # the 5.0 timeout
        assert env.now == 5.0
        with pytest.raises(simpy.core.EmptySchedule):
            env.step()


SMALL = ModelSpec("small", 4, 1024, 8, 2, 2048, 16, 4, 1024)


def _nic_step() -> tuple[StepWorkload, object]:
    """EP 16 over two nodes, PP 2, DP 2, 24 micro-batches: NIC replay with the steady shortcut."""
    layout = layout_preset("megascale-moe").with_(pp=2, ep=16, micro_batch=1)
    workload = StepWorkload(SMALL, layout, 32, 8, 48, 4096)
    return workload, replace(cluster_preset("h100", 32), nic_bandwidth_Bps=10e9)


def _steps() -> list[EngineResult]:
    from simulator.costs.calibration import DEFAULT_CALIBRATION

    overlap = layout_preset("megascale-moe").with_(
        pp=2, ep=16, ep_overlap=True, schedule="interleaved", virtual_stages=2
    )
    deepseek = StepWorkload(model_preset("deepseekmoe"), overlap, 32, 8, global_batch=16, seq_len=4096)
    nic, cluster = _nic_step()
    step = run_step(nic, cluster, DEFAULT_CALIBRATION)
    assert step.runs  # the steady shortcut ran (tasks on the NIC at op level)
    return [
        Engine(deepseek, cluster_preset("h800", 32), memoize=False).run(),
        Engine(deepseek, cluster_preset("h800", 32)).run(),
        step.result,
    ]


def _fields(result: EngineResult) -> tuple:
    stages = [vars(log) for log in result.stages]
    return result.step_time_s, result.simulated_ops, stages, result.network_bytes, result.phase_spans


def test_steps_equal_bit_for_bit_on_simpy(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _steps()
    monkeypatch.setattr(sim_env, "FAST", False)
    reference = _steps()
    for mine, theirs in zip(fast, reference, strict=True):
        assert _fields(mine) == _fields(theirs)
