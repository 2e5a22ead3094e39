"""Task timers: how the engine turns one pipeline task of one place into simulated time.

``MemoTimer`` times each distinct task once, at op level, in a private environment on an idle NVLink of
its own, and replays it as one timeout. That is exact only while a task touches nothing but its own
stage's compute stream and NVLink, which no pipeline-level traffic shares (PP and DP go over the NIC):
the folded placement without cross-node EP or CP across nodes (``Placement.memoizable``). ``OpTimer`` runs
every op of every task in the shared environment, on the placement's links. The two agree to 1e-9 where
memoizing is allowed (tests/test_pipeline.py).
"""

from __future__ import annotations

from collections.abc import Generator

import simpy

from simulator.calibration import Calibration
from simulator.faults import StageFault, scale_compute
from simulator.network import FluidNetwork
from simulator.placement import Placement
from simulator.ranks import Place
from simulator.tasks import OpCosts, TaskTiming, run_task
from topologies.hardware import GpuSpec
from workloads.schedules import Task
from workloads.step import StepWorkload


class CostCache:
    """Cost-model numbers of each task's op list, computed once per (task key, compute slowdown)."""

    def __init__(self, workload: StepWorkload, gpu: GpuSpec, calibration: Calibration) -> None:
        self.workload, self.gpu, self.cal = workload, gpu, calibration
        self._costs: dict[tuple, OpCosts] = {}

    def get(self, key: tuple, compute_factor: float = 1.0) -> OpCosts:
        if (key, compute_factor) not in self._costs:
            ops = self.workload.task_ops(key)
            costs = OpCosts.of(ops, self.gpu, self.cal, self.gpu.nvlink_latency_s)
            self._costs[(key, compute_factor)] = scale_compute(costs, ops, compute_factor)
        return self._costs[(key, compute_factor)]


class MemoTimer:
    """Each distinct task timed once in a private environment, then replayed as one timeout."""

    def __init__(self, env: simpy.Environment, costs: CostCache, stage_faults: list[StageFault]) -> None:
        self.env, self.costs, self.stage_faults = env, costs, stage_faults
        self.workload = costs.workload
        self.memo: dict[tuple, TaskTiming] = {}
        self.simulated_ops = 0

    def task_timing(self, key: tuple, stage: int | None = None) -> TaskTiming:
        """Time a task alone, at op level, on ``stage``'s representative (healthy if None)."""
        fault = self.stage_faults[stage] if stage is not None else StageFault()
        slow = (fault.compute_factor, fault.nvlink_factor)  # the NIC does not touch a memoized task
        memo_key = key if slow == (1.0, 1.0) else (key, slow)  # a slowed stage's tasks are timed apart
        if memo_key not in self.memo:
            env = simpy.Environment()
            network = FluidNetwork(env, {"nvl": self.costs.gpu.nvlink_bandwidth_Bps / fault.nvlink_factor})
            timing = TaskTiming()
            ops = self.workload.task_ops(key)
            costs = self.costs.get(key, fault.compute_factor)
            run_task(env, ops, costs, network, ("nvl",), timing, lanes=self.workload.task_lanes(key))
            env.run()
            self.simulated_ops += len(ops)
            self.memo[memo_key] = timing
        return self.memo[memo_key]

    def run(self, place: Place, task: Task) -> Generator[simpy.Event, object, TaskTiming]:
        timing = self.task_timing(self.workload.task_key(place.stage, task), place.stage)
        yield self.env.timeout(timing.duration_s)
        return timing


class OpTimer:
    """Every op of every task run in the shared environment, on the placement's links."""

    def __init__(self, placement: Placement, costs: CostCache) -> None:
        self.placement, self.costs = placement, costs
        self.workload = costs.workload
        self.simulated_ops = 0

    def run(self, place: Place, task: Task) -> Generator[simpy.Event, object, TaskTiming]:
        key = self.workload.task_key(place.stage, task)
        ops = self.workload.task_ops(key)
        timing = TaskTiming()
        costs = self.costs.get(key, self.placement.compute_factor(place))
        yield self.placement.start_task(place, task, ops, costs, self.workload.task_lanes(key), timing)
        self.simulated_ops += len(ops)
        return timing
