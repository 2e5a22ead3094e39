"""Op-level timing of one pipeline task, or of one op alone: the public way to look inside a step.

Figures that show where a task's time goes (fused pairs, hidden EP communication, one collective)
ask here by stage and schedule Task; the workload builds the task's key, so callers never spell engine
keys. Only this module reaches into the engine's task timer, so only it changes when the engine does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from simulator.costs.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.costs.kernels import collective_latency_s
from simulator.costs.op_time import transfer_alone_s
from simulator.engine.engine import Engine
from simulator.engine.sim_env import environment
from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import OpCosts
from simulator.streams.tasks import TaskTiming, run_task
from topologies.cluster import ClusterSpec
from topologies.hardware import GpuSpec
from workloads.graph.step import StepWorkload
from workloads.ops import Op
from workloads.schedules.base import Task
from workloads.schedules.pipeline_tasks import TaskKey


@dataclass(frozen=True)
class OpTime:
    """One op of a timed task and when it ran, in seconds from the task's start."""

    op: Op
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class TaskTime:
    """One pipeline task timed alone on its GPU: span, exposed comm per group, its ops in program order."""

    duration_s: float
    compute_busy_s: float
    exposed_comm_s: Mapping[str, float]
    ops: tuple[OpTime, ...]


def time_task(
    workload: StepWorkload,
    cluster: ClusterSpec,
    stage: int,
    task: Task,
    calibration: Calibration = DEFAULT_CALIBRATION,
) -> TaskTime:
    """``task`` of ``stage`` run at op level alone on the stage's GPU and NVLink, its NIC bytes on an idle NIC
    (Engine.task_timing)."""
    return task_timer(workload, cluster, calibration)(stage, task)


def task_timer(
    workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration = DEFAULT_CALIBRATION
) -> Callable[[int, Task], TaskTime]:
    """``time_task`` for many tasks of one step: one engine (and its memo of task timings) for all of them."""
    engine = Engine(workload, cluster, calibration)

    def timed(stage: int, task: Task) -> TaskTime:
        key = workload.task_key(stage, task)
        timing = engine.task_timing(key, stage)
        spans = {index: (begin, end) for index, begin, end in timing.intervals}
        ops = tuple(OpTime(op, *spans[index]) for index, op in enumerate(workload.task_ops(key)))
        return TaskTime(timing.duration_s, timing.compute_busy_s, dict(timing.exposed_comm_s), ops)

    return timed


def key_timer(
    workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration = DEFAULT_CALIBRATION
) -> Callable[[TaskKey, int], float]:
    """Seconds of any task key (a phase over blocks the step need not have, e.g. one layer alone) run alone on a
    stage's GPU: for costing candidate pipeline splits (simulator/report/balance.py). One engine for all."""
    engine = Engine(workload, cluster, calibration)
    return lambda key, stage: engine.task_timing(key, stage).duration_s


def time_op_s(op: Op, gpu: GpuSpec, calibration: Calibration = DEFAULT_CALIBRATION) -> float:
    """One op (without dependencies) alone on ``gpu`` with an idle NVLink, from its host launch to its end."""
    env = environment()
    network = FluidNetwork(env, {"nvl": gpu.nvlink_bandwidth_Bps})
    timing = TaskTiming()
    costs = OpCosts.of((op,), gpu, calibration)
    run_task(env, (op,), costs, network, ("nvl",), timing)
    env.run()
    return timing.duration_s


def comm_alone_s(op: Op, gpu: GpuSpec, calibration: Calibration = DEFAULT_CALIBRATION) -> float:
    """An op's communication alone on an idle NVLink: its latency + wire bytes / bandwidth (no compute; the whole
    op alone, compute included: simulator/costs/op_time.op_time_alone_s)."""
    return collective_latency_s(op, gpu, calibration) + transfer_alone_s(op, gpu, calibration)
