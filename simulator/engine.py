"""The simpy engine: one training step of a pipeline, folded by symmetry.

Symmetry folding (DESIGN.md): with balanced routing the GPUs of a stage do the same work at the same
time and every data-parallel replica copies every other, so the engine simulates one representative
GPU per pipeline stage. Its links stand for every member's: an intra-node collective moves each
member's egress bytes over the representative's NVLink, and PP sends and DP buckets share its NIC.
Cost therefore grows with stages x micro-batches, not with the GPU count.

Memoization: a task's ops use only the GPU's compute stream and NVLink, which nothing else at the
pipeline level touches (PP and DP traffic go over the NIC), so each distinct task is timed once at op
level and replayed as one timeout. ``memoize=False`` runs every task at op level instead; the two
agree to 1e-9 (tests/test_pipeline.py).

Faults (simulator/faults.py) break symmetry; the representative of an affected stage becomes its
slowest member: a straggler's factor scales the stage's compute kernels, a degraded port divides the
stage's NVLink or NIC capacity, a failed NIC leaves the stage 1/k of a NIC shared by k GPUs. This
assumes every member of a stage waits for the slowest (each intra-node collective is a barrier, so
the whole group runs at the straggler's pace), that DP rings and PP transfers run at their slowest
member's pace (every replica's stage is charged the fault), and that a failed NIC's detour over NVLink
costs NVLink nothing. Memoized timings are keyed by the stage's fault, so faulty stages are timed
apart. simulator/unfolded.py applies the same faults GPU by GPU (tests/test_faults.py compares).

Observers (trace, link statistics, bench) are probes (simulator/probes.py): the engine tells them of
each task, transfer, rate change and the step's end; with none, no event is built.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import simpy

from simulator.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.costs import memory_time_s
from simulator.faults import Faults, StageFault, gpu_index, scale_compute
from simulator.network import FluidNetwork
from simulator.probes import Probe, Transfer, start_probes, subscribed
from simulator.tasks import OpCosts, TaskTiming, run_task
from topologies.cluster import ClusterSpec
from workloads.schedules import Task
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

    def __init__(
        self,
        workload: StepWorkload,
        cluster: ClusterSpec,
        calibration: Calibration = DEFAULT_CALIBRATION,
        *,
        memoize: bool = True,
        faults: Faults | None = None,
        probes: Iterable[Probe] = (),
    ) -> None:
        self.workload = workload
        self.probes = subscribed(probes)  # observers of this run (simulator/probes.py)
        self.cluster = cluster
        self.cal = calibration
        # Memoization is exact only while tasks stay off the NIC; cross-node EP puts task traffic on the
        # NIC beside PP sends and DP buckets, so such workloads run every task at op level instead.
        self.memoize = memoize and not workload.tasks_use_nic
        self.gpu = cluster.gpu
        self.env = simpy.Environment()
        self.faults = faults or Faults()
        self.faults.validate(cluster)
        self.stage_faults = self.faults.stage_faults(
            cluster, workload.pp, workload.num_gpus // (workload.pp * workload.dp)
        )
        capacities = {}
        for stage in range(workload.pp):
            capacities[("nic_out", stage)] = cluster.nic_effective_Bps / self.stage_faults[stage].nic_factor
            capacities[("nic_in", stage)] = cluster.nic_effective_Bps / self.stage_faults[stage].nic_factor
            # PP sends and DP sync between GPUs of one node use NVLink (scale-up domains larger than a stage)
            capacities[("nvl_pp", stage)] = self._nvlink_Bps(stage)
            capacities[("nvl_dp", stage)] = self._nvlink_Bps(stage)
        self.network = FluidNetwork(self.env, capacities)
        # NOTE: each stage's NVLink carries only that stage's collectives, so it gets a network of its own:
        # max-min rates decompose over disjoint links, and small networks keep rate updates cheap. When
        # tasks also use the NIC (cross-node EP), their flows span both, so everything shares one network.
        if workload.tasks_use_nic:
            for stage in range(workload.pp):
                self.network.capacities_Bps[("nvl", stage)] = self._nvlink_Bps(stage)
                self.network.bytes_sent[("nvl", stage)] = 0.0
            self.nvlink_networks = [self.network] * workload.pp
        else:
            self.nvlink_networks = [
                FluidNetwork(self.env, {("nvl", stage): self._nvlink_Bps(stage)}) for stage in range(workload.pp)
            ]
        self._costs: dict[tuple, OpCosts] = {}
        self._memo: dict[tuple, TaskTiming] = {}
        self._arrivals: dict[tuple, simpy.Event] = {}
        self._sent_at: dict[tuple, float] = {}
        self._pp_routes: dict[tuple, tuple] = {}
        self.simulated_ops = 0
        self.stages = [StageLog() for _ in range(workload.pp)]

    # --- task timing -------------------------------------------------------------------------------
    def _nvlink_Bps(self, stage: int) -> float:
        return self.gpu.nvlink_bandwidth_Bps / self.stage_faults[stage].nvlink_factor

    def _op_costs(self, key: tuple, compute_factor: float = 1.0) -> OpCosts:
        if (key, compute_factor) not in self._costs:
            ops = self.workload.task_ops(key)
            costs = OpCosts.of(ops, self.gpu, self.cal, self.gpu.nvlink_latency_s)
            self._costs[(key, compute_factor)] = scale_compute(costs, ops, compute_factor)
        return self._costs[(key, compute_factor)]

    def task_timing(self, key: tuple, stage: int | None = None) -> TaskTiming:
        """Time a task alone, at op level, in a private environment (exact: see module docstring)."""
        fault = self.stage_faults[stage] if stage is not None else StageFault()
        slow = (fault.compute_factor, fault.nvlink_factor)  # the NIC does not touch a memoized task
        memo_key = key if slow == (1.0, 1.0) else (key, slow)  # a slowed stage's tasks are timed apart
        if memo_key not in self._memo:
            env = simpy.Environment()
            network = FluidNetwork(env, {"nvl": self.gpu.nvlink_bandwidth_Bps / fault.nvlink_factor})
            timing = TaskTiming()
            ops = self.workload.task_ops(key)
            run_task(
                env,
                ops,
                self._op_costs(key, fault.compute_factor),
                network,
                ("nvl",),
                timing,
                lanes=self.workload.task_lanes(key),
            )
            env.run()
            self.simulated_ops += len(ops)
            self._memo[memo_key] = timing
        return self._memo[memo_key]

    def _run_task(self, place, task: Task):
        stage = self._stage_of(place)
        key = self.workload.task_key(stage, task)
        if self.memoize:
            timing = self.task_timing(key, stage)
            yield self.env.timeout(timing.duration_s)
            return timing
        timing = TaskTiming()
        ops = self.workload.task_ops(key)
        nic = (("nic_out", stage), ("nic_in", stage))
        costs = self._op_costs(key, self.stage_faults[stage].compute_factor)
        yield run_task(
            self.env,
            ops,
            costs,
            self.nvlink_networks[stage],
            (("nvl", stage),),
            timing,
            lanes=self.workload.task_lanes(key),
            nic_links=nic,
        )
        self.simulated_ops += len(ops)
        return timing

    # --- placement: a place is what runs one stage's tasks; here the stage's representative GPU ------
    # simulator/unfolded.py overrides these to run every GPU (a place is then (replica, stage, rank)).
    def _places(self) -> list:
        return list(range(self.workload.pp))

    def _stage_of(self, place) -> int:
        return place

    def _log(self, place) -> StageLog:
        return self.stages[place]

    def _peer(self, place, stage: int):
        """The place of ``stage`` that exchanges pipeline data with ``place``."""
        return stage

    def _node_of(self, replica: int, stage: int) -> int:
        """Node of the first GPU of (replica, stage) under the placement of simulator.faults.gpu_index."""
        per_stage = self.workload.num_gpus // (self.workload.pp * self.workload.dp)
        return gpu_index(replica, stage, 0, self.workload.pp, per_stage) // self.cluster.gpus_per_node

    def _pp_links(self, src, dst) -> tuple:
        if (src, dst) not in self._pp_routes:  # NOTE: once per stage pair, not per send
            same_node = self._node_of(0, src) == self._node_of(0, dst)  # both stages in one scale-up domain
            self._pp_routes[src, dst] = (("nvl_pp", src),) if same_node else (("nic_out", src), ("nic_in", dst))
        return self._pp_routes[src, dst]

    def _dp_links(self, place) -> tuple:
        if self.cluster.num_nodes == 1:  # every replica in one scale-up domain
            return (("nvl_dp", place),)
        return ("nic_out", place), ("nic_in", place)

    # --- pipeline ----------------------------------------------------------------------------------
    def _inputs(self, place, task: Task) -> list[tuple]:
        """Arrival keys ``task`` waits for before it starts (each ends with the receiving place)."""
        return [flow[:-1] + (place,) for flow in self.workload.schedule.inputs(self._stage_of(place), task)]

    def _arrival(self, key: tuple) -> simpy.Event:
        if key not in self._arrivals:
            self._arrivals[key] = self.env.event()
        return self._arrivals[key]

    def _send(self, src, dst, key: tuple):
        yield self.env.timeout(self.cluster.nic_latency_s)
        links = self._pp_links(src, dst)
        start = self.env.now
        yield self.network.transfer(links, self.workload.pp_bytes_per_gpu)
        for probe in self.probes:
            probe.on_transfer(Transfer("pp", src, dst, start, self.env.now, self.workload.pp_bytes_per_gpu, key))
        self._arrival(key).succeed()

    def _stage(self, place, dp_gate: simpy.Event | None):
        stage = self._stage_of(place)
        log = self._log(place)
        order = self.workload.stage_order(stage)
        first_forward = True
        for task in order:
            for key in self._inputs(place, task):
                arrival = self._arrival(key)
                if not arrival.triggered:
                    wait_start = self.env.now
                    yield arrival
                    sent = self._sent_at.get(key, wait_start)
                    log.pp_wait_s += self.env.now - max(wait_start, sent)
            if first_forward and dp_gate is not None and not dp_gate.triggered:
                wait_start = self.env.now
                yield dp_gate
                log.dp_exposed_s += self.env.now - wait_start
            first_forward = False
            begin = self.env.now
            timing = yield from self._run_task(place, task)
            log.tasks.append((task, begin, self.env.now))
            log.busy_s += self.env.now - begin
            log.compute_busy_s += timing.compute_busy_s
            log.model_flops += timing.model_flops
            for group, seconds in timing.exposed_comm_s.items():
                log.exposed_comm_s[group] = log.exposed_comm_s.get(group, 0.0) + seconds
            for probe in self.probes:
                probe.on_task(place, stage, task, begin, self.env.now, timing)
            self._forward_output(place, task)
        log.pipeline_end_s = self.env.now

    def _forward_output(self, place, task: Task) -> None:
        for flow in self.workload.schedule.outputs(self._stage_of(place), task):
            peer = self._peer(place, flow.stage)
            key = flow[:-1] + (peer,)
            self._sent_at[key] = self.env.now
            self.env.process(self._send(place, peer, key))

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

    def _param_gather(self, place, gate: simpy.Event, buckets: int):
        """All-gather parameters bucket by bucket; with DP overlap the first bucket opens the stage."""
        _, params = self._dp_bytes(self._stage_of(place))
        links = self._dp_links(place)
        for bucket in range(buckets):
            transfer = self.network.transfer(links, params / buckets)
            if self.probes:
                transfer.callbacks.append(
                    self._logger("dp-params", self._stage_of(place), self.env.now, params / buckets, bucket)
                )
            yield transfer
            if bucket == 0 and self.workload.layout.dp_overlap and not gate.triggered:
                gate.succeed()
        if not gate.triggered:
            gate.succeed()

    def _grad_sync(self, place, buckets: int):
        """Reduce gradients bucket by bucket as the last backward frees them, then the optimizer step."""
        log, stage = self._log(place), self._stage_of(place)
        grad, _ = self._dp_bytes(stage)
        links = self._dp_links(place)
        _, begin, end = log.tasks[-1]
        transfers = []
        for bucket in range(buckets if grad > 0 else 0):
            ready = begin + (bucket + 1) * (end - begin) / buckets if self.workload.layout.dp_overlap else end
            if ready > self.env.now:
                yield self.env.timeout(ready - self.env.now)
            transfers.append(self.network.transfer(links, grad / buckets))
            if self.probes:
                transfers[-1].callbacks.append(self._logger("dp-grads", stage, self.env.now, grad / buckets, bucket))
        yield self.env.all_of(transfers)
        log.dp_exposed_s += self.env.now - end
        zero = self.workload.layout.zero_stage >= 1  # ZeRO-1 and up: each GPU updates its shard only
        held = sum(h / (dp if zero else 1) for h, _, dp in self.workload.stage_param_groups(stage))
        optimizer_s = memory_time_s(held * ADAM_BYTES_PER_PARAM, 1, self.gpu, self.cal)
        yield self.env.timeout(optimizer_s)
        log.end_s = self.env.now

    def _logger(self, kind: str, stage: int, start: float, nbytes: float, bucket: int):
        """A callback that tells the probes of a finished DP transfer."""

        def log(_event: simpy.Event) -> None:
            for probe in self.probes:
                probe.on_transfer(Transfer(kind, stage, stage, start, self.env.now, nbytes, (bucket,)))

        return log

    def _stage_with_sync(self, place):
        buckets = self.workload.layers_per_chunk * self.workload.chunks
        gate = None
        if self.workload.dp > 1:
            gate = self.env.event()
            self.env.process(self._param_gather(place, gate, buckets))
        yield from self._stage(place, gate)
        yield from self._grad_sync(place, buckets)

    def _bytes_sent(self) -> dict:
        sent = dict(self.network.bytes_sent)
        for network in getattr(self, "nvlink_networks", ()):
            if network is not self.network:
                sent.update(network.bytes_sent)
        return sent

    def run(self) -> EngineResult:
        wall_start = time.perf_counter()
        start_probes(self.probes, self, (self.network, *getattr(self, "nvlink_networks", ())))
        places = self._places()
        for place in places:
            self.env.process(self._stage_with_sync(place))
        self.env.run()
        step_time_s = max(self._log(place).end_s for place in places)  # every place's, so probes see the step
        result = EngineResult(
            step_time_s,
            self.stages,
            dict(self._memo),
            self.simulated_ops,
            time.perf_counter() - wall_start,
            self._bytes_sent(),
        )
        for probe in self.probes:
            probe.on_run(result)
        return result
