"""The simpy engine: one training step of a pipeline, folded by symmetry.

Symmetry folding (DESIGN.md): with balanced routing the GPUs of a stage do the same work at the same
time and every data-parallel replica copies every other, so the engine simulates one representative
GPU per pipeline stage. Its links stand for every member's: an intra-node collective moves each
member's egress bytes over the representative's NVLink, and PP sends and DP buckets share its NIC.
Cost therefore grows with stages x micro-batches, not with the GPU count.

Memoization: a task's ops use only the GPU's compute stream and NVLink, which nothing else at the
pipeline level touches (PP and DP traffic go over the NIC), so each distinct task is timed once at op
level and replayed as one timeout. ``memoize=False`` runs every task at op level instead; the two
agree exactly (tests/test_engine.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import simpy

from simulator.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.costs import memory_time_s
from simulator.network import FluidNetwork
from simulator.tasks import OpCosts, TaskTiming, run_task
from topologies.cluster import ClusterSpec
from workloads.schedules import BACKWARD, FORWARD, Task
from workloads.step import StepWorkload

ADAM_BYTES_PER_PARAM = 32  # read + write FP32 master, m and v (12 B -> 24 B) and BF16 param, grad (8 B)


@dataclass
class StageLog:
    """What one stage did during the step."""

    busy_s: float = 0.0
    pipeline_end_s: float = 0.0
    end_s: float = 0.0
    pp_wait_s: float = 0.0
    dp_exposed_s: float = 0.0
    exposed_comm_s: dict[str, float] = field(default_factory=dict)
    compute_busy_s: float = 0.0
    model_flops: float = 0.0
    tasks: list[tuple[Task, float, float]] = field(default_factory=list)


@dataclass
class EngineResult:
    """Raw output of one simulated step."""

    step_time_s: float
    stages: list[StageLog]
    task_timings: dict[tuple, TaskTiming]
    simulated_ops: int
    sim_wall_s: float
    network_bytes: dict


class PipelineEngine:
    """Simulates one step of ``workload`` on ``cluster``."""

    def __init__(self, workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration = DEFAULT_CALIBRATION,
                 *, memoize: bool = True, record_ops: bool = False) -> None:
        self.workload = workload
        self.cluster = cluster
        self.cal = calibration
        # Memoization is exact only while tasks stay off the NIC; cross-node EP puts task traffic on the
        # NIC beside PP sends and DP buckets, so such workloads run every task at op level instead.
        self.memoize = memoize and not workload.tasks_use_nic
        self.record_ops = record_ops
        self.gpu = cluster.gpu
        self.env = simpy.Environment()
        capacities = {}
        for stage in range(workload.pp):
            capacities[("nvl", stage)] = self.gpu.nvlink_bandwidth_Bps
            capacities[("nic_out", stage)] = cluster.nic_effective_Bps
            capacities[("nic_in", stage)] = cluster.nic_effective_Bps
        self.network = FluidNetwork(self.env, capacities)
        self._costs: dict[tuple, OpCosts] = {}
        self._memo: dict[tuple, TaskTiming] = {}
        self._arrivals: dict[tuple, simpy.Event] = {}
        self._sent_at: dict[tuple, float] = {}
        self.simulated_ops = 0
        self.stages = [StageLog() for _ in range(workload.pp)]
        self.op_timings: list[tuple[int, Task, TaskTiming]] = []

    # --- task timing -------------------------------------------------------------------------------
    def _op_costs(self, key: tuple) -> OpCosts:
        if key not in self._costs:
            ops = self.workload.task_ops(key)
            self._costs[key] = OpCosts.of(ops, self.gpu, self.cal, self.gpu.nvlink_latency_s)
        return self._costs[key]

    def task_timing(self, key: tuple) -> TaskTiming:
        """Time a task alone, at op level, in a private environment (exact: see module docstring)."""
        if key not in self._memo:
            env = simpy.Environment()
            network = FluidNetwork(env, {"nvl": self.gpu.nvlink_bandwidth_Bps})
            timing = TaskTiming()
            ops = self.workload.task_ops(key)
            run_task(env, ops, self._op_costs(key), network, ("nvl",), timing)
            env.run()
            self.simulated_ops += len(ops)
            self._memo[key] = timing
        return self._memo[key]

    def _run_task(self, stage: int, task: Task):
        key = self.workload.task_key(stage, task)
        if self.memoize:
            timing = self.task_timing(key)
            yield self.env.timeout(timing.duration_s)
            return timing
        timing = TaskTiming()
        ops = self.workload.task_ops(key)
        nic = (("nic_out", stage), ("nic_in", stage))
        yield run_task(self.env, ops, self._op_costs(key), self.network, (("nvl", stage),), timing, nic)
        self.simulated_ops += len(ops)
        if self.record_ops:
            self.op_timings.append((stage, task, timing))
        return timing

    # --- pipeline ----------------------------------------------------------------------------------
    def _source(self, stage: int, task: Task) -> tuple | None:
        """The (stage, chunk) whose output this task consumes, or None if it needs no input."""
        pp, chunks = self.workload.pp, self.workload.chunks
        if task.direction == FORWARD:
            if stage > 0:
                return stage - 1, task.chunk
            return (pp - 1, task.chunk - 1) if task.chunk > 0 else None
        if stage < pp - 1:
            return stage + 1, task.chunk
        return (0, task.chunk + 1) if task.chunk < chunks - 1 else None

    def _arrival(self, key: tuple) -> simpy.Event:
        if key not in self._arrivals:
            self._arrivals[key] = self.env.event()
        return self._arrivals[key]

    def _send(self, src: int, dst: int, key: tuple):
        yield self.env.timeout(self.cluster.nic_latency_s)
        links = (("nic_out", src), ("nic_in", dst))
        yield self.network.transfer(links, self.workload.pp_bytes_per_gpu)
        self._arrival(key).succeed()

    def _stage(self, stage: int, dp_gate: simpy.Event | None):
        log = self.stages[stage]
        order = self.workload.stage_order(stage)
        first_forward = True
        for task in order:
            source = self._source(stage, task)
            if source is not None:
                arrival = self._arrival((task.direction, task.micro_batch, task.chunk, stage))
                if not arrival.triggered:
                    wait_start = self.env.now
                    yield arrival
                    sent = self._sent_at.get((task.direction, task.micro_batch, task.chunk, stage), wait_start)
                    log.pp_wait_s += self.env.now - max(wait_start, sent)
            if first_forward and dp_gate is not None and not dp_gate.triggered:
                wait_start = self.env.now
                yield dp_gate
                log.dp_exposed_s += self.env.now - wait_start
            first_forward = False
            begin = self.env.now
            timing = yield from self._run_task(stage, task)
            log.tasks.append((task, begin, self.env.now))
            log.busy_s += self.env.now - begin
            log.compute_busy_s += timing.compute_busy_s
            log.model_flops += timing.model_flops
            for group, seconds in timing.exposed_comm_s.items():
                log.exposed_comm_s[group] = log.exposed_comm_s.get(group, 0.0) + seconds
            self._forward_output(stage, task)
        log.pipeline_end_s = self.env.now

    def _forward_output(self, stage: int, task: Task) -> None:
        pp, chunks = self.workload.pp, self.workload.chunks
        if task.direction == FORWARD:
            if stage < pp - 1:
                dst = (stage + 1, task.chunk)
            elif task.chunk < chunks - 1:
                dst = (0, task.chunk + 1)
            else:
                return
        else:
            if stage > 0:
                dst = (stage - 1, task.chunk)
            elif task.chunk > 0:
                dst = (pp - 1, task.chunk - 1)
            else:
                return
        key = (task.direction, task.micro_batch, dst[1], dst[0])
        self._sent_at[key] = self.env.now
        self.env.process(self._send(stage, dst[0], key))

    # --- data parallelism ----------------------------------------------------------------------------
    def _dp_bytes(self, stage: int) -> tuple[float, float]:
        """(gradient wire bytes, parameter wire bytes) each GPU of ``stage`` sends per step over its NIC."""
        grad = params = 0.0
        for _, synced, dp in self.workload.stage_param_groups(stage):  # experts sync over expert_dp
            if dp == 1:
                continue
            share = (dp - 1) / dp
            if self.workload.layout.grad_sync == "bf16-a2a":  # Sec. 5: BF16 all-to-all, FP32 local sum
                grad += synced * 2 * share / self.cal.all_to_all_efficiency
            else:
                grad += synced * 4 * share / self.cal.ring_efficiency
            params += synced * 2 * share / self.cal.ring_efficiency  # ZeRO: all-gather updated BF16 params
        return grad, params

    def _param_gather(self, stage: int, gate: simpy.Event, buckets: int):
        """All-gather parameters bucket by bucket; with DP overlap the first bucket opens the stage."""
        _, params = self._dp_bytes(stage)
        links = (("nic_out", stage), ("nic_in", stage))
        for bucket in range(buckets):
            yield self.network.transfer(links, params / buckets)
            if bucket == 0 and self.workload.layout.dp_overlap and not gate.triggered:
                gate.succeed()
        if not gate.triggered:
            gate.succeed()

    def _grad_sync(self, stage: int, buckets: int):
        """Reduce gradients bucket by bucket as the last backward frees them, then the optimizer step."""
        log = self.stages[stage]
        grad, _ = self._dp_bytes(stage)
        links = (("nic_out", stage), ("nic_in", stage))
        task, begin, end = log.tasks[-1]
        transfers = []
        for bucket in range(buckets):
            ready = begin + (bucket + 1) * (end - begin) / buckets if self.workload.layout.dp_overlap else end
            if ready > self.env.now:
                yield self.env.timeout(ready - self.env.now)
            transfers.append(self.network.transfer(links, grad / buckets))
        yield self.env.all_of(transfers)
        held = sum(h / dp for h, _, dp in self.workload.stage_param_groups(stage))  # ZeRO-sharded
        optimizer_s = memory_time_s(held * ADAM_BYTES_PER_PARAM, 1, self.gpu, self.cal)
        yield self.env.timeout(optimizer_s)
        log.end_s = self.env.now
        log.dp_exposed_s += self.env.now - end

    def _stage_with_sync(self, stage: int):
        buckets = self.workload.layers_per_chunk * self.workload.chunks
        gate = None
        if self.workload.dp > 1:
            gate = self.env.event()
            self.env.process(self._param_gather(stage, gate, buckets))
        yield from self._stage(stage, gate)
        if self.workload.dp > 1:
            yield from self._grad_sync(stage, buckets)
        else:
            self.stages[stage].end_s = self.env.now

    def run(self) -> EngineResult:
        wall_start = time.perf_counter()
        for stage in range(self.workload.pp):
            self.env.process(self._stage_with_sync(stage))
        self.env.run()
        step_time_s = max(log.end_s for log in self.stages)
        return EngineResult(step_time_s, self.stages, dict(self._memo), self.simulated_ops,
                            time.perf_counter() - wall_start, dict(self.network.bytes_sent))

