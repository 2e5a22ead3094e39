"""The unfolded engine: one step with every GPU simulated, for small clusters and for checking folding.

Every DP replica, every stage and every GPU of the intra-node group runs its own tasks at op level on
one FluidNetwork whose links are the edges of topologies.build_cluster (capacity = bandwidth_Bps).
Routes come from gpu_path. The pipeline logic is PipelineEngine's; only placement and traffic differ:

- a collective starts when every member of its group has reached it (a barrier); each member then
  moves its egress bytes (collective_wire_bytes) to its ring neighbour (all-gather, reduce-scatter) or
  split evenly over all peers (all-to-all); it ends, for every member, when all its flows have landed;
- a PP send goes from each GPU of stage s to the GPU of the same local rank of the next stage in the
  same replica; DP parameter gathers and gradient reductions are ring flows among the GPUs of the same
  (stage, local rank) across replicas, with the folded engine's per-GPU bytes (_dp_bytes).

Latency is charged as in the folded engine, per operation rather than per hop: (n - 1) x NVLink
latency per collective (OpCosts, before the member joins the barrier; members arrive together) and one
NIC latency per PP send; DP transfers carry none. Edge latency_s attributes are therefore unused.

Faults (simulator/faults.py) apply GPU by GPU: a straggler's compute kernels are slower, a degraded
port's graph edges (both directions) lose capacity, and routes avoid a failed NIC (faults.fault_path:
an NVLink hop to the next rail whose NICs work at both ends). The other members of a group then wait
for the slow one at each collective's barrier.

GPU numbering (simulator.faults.gpu_index): replica d, stage s, local rank r is GPU (d x pp + s) x n + r.
With n = gpus_per_node each group fills a node and rank r sits on rail r: PP and DP flows stay on the NIC
rails and the NVLink ports carry only the group's collectives, the conditions under which folding is
exact (tests/test_unfolded.py; also two stages per node). Not simulated here: cross-node EP, CP, ETP.
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from simulator.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.engine import EngineResult, PipelineEngine, StageLog
from simulator.faults import Faults, fault_path
from simulator.faults import gpu_index as placement
from simulator.network import FluidNetwork
from simulator.tasks import TaskTiming, run_task
from topologies.cluster import ClusterSpec, build_cluster
from topologies.errors import ConfigError
from workloads.ops import ALL_TO_ALL, Op
from workloads.schedules import Task
from workloads.step import StepWorkload

Place = tuple[int, int, int]  # (replica, stage, local rank)


@dataclass
class _Barrier:
    """Members of one collective instance that have arrived, and the event that ends it for all."""

    arrived: int
    done: simpy.Event


class UnfoldedEngine(PipelineEngine):
    """Simulates one step of ``workload`` on ``cluster`` with every GPU and every flow explicit."""

    def __init__(
        self,
        workload: StepWorkload,
        cluster: ClusterSpec,
        calibration: Calibration = DEFAULT_CALIBRATION,
        faults: Faults | None = None,
    ) -> None:
        if workload.tasks_use_nic:
            raise ConfigError("layout.ep", "the unfolded engine does not simulate cross-node EP (tasks on the NIC) yet")
        for field in ("cp", "etp"):  # its groups are the intra_size GPUs of a stage; CP/ETP groups are not modeled
            if getattr(workload.layout, field) > 1:
                raise ConfigError(f"layout.{field}", "not supported by the unfolded engine; use the folded one")
        super().__init__(workload, cluster, calibration, memoize=False, faults=faults)
        graph = build_cluster(cluster)
        self.network = FluidNetwork(
            self.env,
            {
                (a, b): data["bandwidth_Bps"] / self._edge_factor(a, b, data["kind"])
                for a, b, data in graph.edges(data=True)
            },
        )
        self._failed = self.faults.failed_nics()
        self.n = workload.layout.intra_size
        self._logs: dict[Place, StageLog] = {place: StageLog() for place in self._places()}
        # Replica 0, rank 0 stands for its stage in the EngineResult, so build_report works unchanged.
        self.stages = [self._logs[(0, stage, 0)] for stage in range(workload.pp)]
        self._barriers: dict[tuple, _Barrier] = {}
        self._routes: dict[tuple[int, int], tuple] = {}

    def _edge_factor(self, a: tuple, b: tuple, kind: str) -> float:
        """Bandwidth divisor of a graph edge: a degraded port slows both directions of the GPU's link."""
        gpu = a[1] if a[0] == "gpu" else b[1] if b[0] == "gpu" else None
        return 1.0 if gpu is None or kind not in ("nic", "nvlink") else self.faults.link_factor(kind, gpu)

    # --- placement ---------------------------------------------------------------------------------
    def gpu_index(self, place: Place) -> int:
        """Global GPU index of (replica, stage, local rank)."""
        return placement(*place, self.workload.pp, self.n)

    def _places(self) -> list[Place]:
        w = self.workload
        return [(d, s, r) for d in range(w.dp) for s in range(w.pp) for r in range(w.layout.intra_size)]

    def _stage_of(self, place: Place) -> int:
        return place[1]

    def _log(self, place: Place) -> StageLog:
        return self._logs[place]

    def _peer(self, place: Place, stage: int) -> Place:
        return place[0], stage, place[2]

    def _route(self, src: int, dst: int) -> tuple:
        if (src, dst) not in self._routes:
            self._routes[(src, dst)] = tuple(fault_path(self.cluster, src, dst, self._failed))
        return self._routes[(src, dst)]

    def _pp_links(self, src: Place, dst: Place) -> tuple:
        return self._route(self.gpu_index(src), self.gpu_index(dst))

    def _dp_links(self, place: Place) -> tuple:
        replica, stage, rank = place
        return self._route(self.gpu_index(place), self.gpu_index(((replica + 1) % self.workload.dp, stage, rank)))

    # --- tasks -------------------------------------------------------------------------------------
    def _run_task(self, place: Place, task: Task):
        key = self.workload.task_key(place[1], task)
        ops = self.workload.task_ops(key)
        timing = TaskTiming()

        def transfer(index: int, nbytes: float) -> simpy.Event:
            return self._collective(place, task, ops[index], index, nbytes)

        costs = self._op_costs(key, self.faults.compute_factor(self.gpu_index(place)))
        yield run_task(self.env, ops, costs, self.network, (), timing, transfer, lanes=self.workload.task_lanes(key))
        self.simulated_ops += len(ops)
        return timing

    def _collective(self, place: Place, task: Task, op: Op, index: int, nbytes: float) -> simpy.Event:
        """Join the group's instance of this collective; the last member to arrive starts every flow."""
        replica, stage, _ = place
        key = (replica, stage, task, index)
        barrier = self._barriers.get(key)
        if barrier is None:
            barrier = self._barriers[key] = _Barrier(0, self.env.event())
        barrier.arrived += 1
        if barrier.arrived == self.n:
            del self._barriers[key]
            flows = self._collective_flows(replica, stage, op, nbytes)
            if flows:
                self.env.all_of(flows).callbacks.append(lambda _event: barrier.done.succeed())
            else:
                barrier.done.succeed()
        return barrier.done

    def _collective_flows(self, replica: int, stage: int, op: Op, nbytes: float) -> list[simpy.Event]:
        """Each member's egress: all to its ring neighbour, or 1/(n-1) to each peer for all-to-all."""
        n = self.n
        if n == 1 or nbytes <= 0:
            return []
        members = [self.gpu_index((replica, stage, rank)) for rank in range(n)]
        flows = []
        for rank, src in enumerate(members):
            if op.collective == ALL_TO_ALL:
                peers = [dst for dst in members if dst != src]
            else:
                peers = [members[(rank + 1) % n]]
            for dst in peers:
                flows.append(self.network.transfer(self._route(src, dst), nbytes / len(peers)))
        return flows

    def run(self) -> EngineResult:
        result = super().run()
        result.step_time_s = max(log.end_s for log in self._logs.values())
        return result
