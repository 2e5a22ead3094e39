"""The unfolded placement: every GPU and every flow simulated, for small clusters and for checking folding.

Every DP replica, stage and local rank is a place (numbered by simulator/engine/ranks.py) and runs its own tasks
at op level on one FluidNetwork whose links are the edges of topologies.build_cluster (capacity =
bandwidth_Bps). Routes come from faults.fault_path (topologies.gpu_path, around failed NICs).

A collective starts when every member of its group has reached it (a barrier); each member then moves
its egress bytes, and the collective ends, for every member, when all its flows have landed. The groups
(``RankMap.members``):

- tp / sp: the intra_size GPUs of one CP rank of a replica's stage, inside one node;
- cp (ring attention): the cp GPUs of one TP rank; inside a node when intra_size x cp <= GPUs per node,
  else on consecutive nodes (a hop to another node takes the NIC, over PXN when the rails differ);
- ep: ep GPUs at stride etp in the stage's expert order, over ep / (GPUs per node / etp) nodes;
- etp: the etp consecutive GPUs, inside a node, that split the same experts' width;
- dp / edp (per-layer FSDP / ZeRO-2 and 3 collectives, workloads/graph/fsdp.py): the replicas and CP ranks of one
  TP rank, and the replicas of one expert group position.

Ring collectives (all-gather, reduce-scatter, ring attention) send all of a member's egress to its ring
successor; an all-to-all splits it evenly over the other members; a cross-node all-to-all (DeepEP,
workloads/ep/plan.py) splits the member's NVLink bytes over its node peers and its NIC bytes over its same-rail
peers in the other nodes (NIC once per remote node). A PP send goes from each GPU of stage s to the GPU of
the same replica and local rank of the next stage; DP parameter gathers and gradient reductions are ring
flows to the same (stage, local rank) of the next replica (with one replica, of the next CP rank), with the
folded engine's per-GPU bytes, each bucket a barrier of its ring like any collective; where replicas share a node (an expert group wider than a replica's
stage, simulator/engine/ranks.py) those hops take NVLink or a PXN detour, which the folded NIC view does not.

Latency is charged as in the folded placement, per operation rather than per hop: (n - 1) x NVLink
latency per collective (OpCosts, before the member joins the barrier; members arrive together) and one
NIC latency per PP send; DP transfers carry none. Edge latency_s attributes are therefore unused.

Faults apply GPU by GPU: a straggler's compute kernels are slower, a degraded port's graph edges (both
directions) lose capacity, and routes avoid a failed NIC (faults.fault_path: an NVLink hop to the next rail
whose NICs work at both ends). The other members of a group then wait for the slow one at each barrier.
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from simulator.engine.faults import Faults, fault_path
from simulator.engine.placement import DpBucket, Placement
from simulator.engine.ranks import TP, Place, group_kind
from simulator.streams.network import FluidNetwork
from simulator.streams.tasks import run_task
from topologies.cluster import ClusterSpec, build_cluster
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.ops import ALL_TO_ALL, Op
from workloads.schedules.base import Task

# Unfolded speed on the development machine (2 shared cores): 3,400-5,900 ops/s for layouts with NVLink
# all-to-alls (megascale-moe and cross-node EP, 32-256 GPUs; each 8-way all-to-all is 56 flows), 70,000-
# 100,000 ops/s for ring-only ones (megatron-lm). The size check assumes the slow kind.
UNFOLDED_OPS_PER_S = 4_000
UNFOLDED_LIMIT_S = 60.0


def unfolded_ops(workload: StepWorkload) -> int:
    """Ops the unfolded placement simulates: every GPU runs every task of its stage."""
    per_stage = sum(
        len(workload.task_ops(workload.task_key(stage, task)))
        for stage in range(workload.pp)
        for task in workload.stage_order(stage)
    )
    return workload.num_gpus // workload.pp * per_stage


def check_unfolded_size(workload: StepWorkload) -> None:
    """Raise ConfigError("engine", ...) when the unfolded run would take more than about a minute."""
    ops = unfolded_ops(workload)
    if ops / UNFOLDED_OPS_PER_S > UNFOLDED_LIMIT_S:
        raise ConfigError(
            "engine",
            f"unfolded: {workload.num_gpus} GPUs x {ops // workload.num_gpus:,} ops each would take about "
            f"{ops / UNFOLDED_OPS_PER_S:,.0f} s (limit {UNFOLDED_LIMIT_S:.0f} s); use the folded engine or fewer GPUs",
        )


@dataclass
class _Barrier:
    """Members of one collective instance that have arrived, and the event that ends it for all."""

    arrived: int
    done: simpy.Event
    joined: simpy.Event  # fires when the last member arrives


class UnfoldedPlacement(Placement):
    """Every GPU a place; every collective a barrier of real per-member flows on the cluster graph."""

    kind = "unfolded"

    def __init__(self, env: simpy.Environment, workload: StepWorkload, cluster: ClusterSpec, faults: Faults) -> None:
        super().__init__(env, workload, cluster, faults)
        self._failed = faults.failed_nics()
        ranks = self.ranks
        self.places = tuple(
            Place(d, s, j) for d in range(workload.dp) for s in range(workload.pp) for j in range(ranks.group)
        )
        self._gpu = {place: ranks.gpu(place) for place in self.places}
        self._barriers: dict[tuple, _Barrier] = {}
        self._dp_rings: dict[tuple[Place, bool], tuple[Place, ...]] = {}
        self._routes: dict[tuple[int, int], tuple] = {}
        self._groups: dict[tuple[Place, str], tuple[int, ...]] = {}  # GPUs of each place's groups
        self._members: dict[tuple[Place, str], tuple[Place, ...]] = {}
        self._plans: dict[tuple[Place, tuple], list[tuple[tuple, float, float]]] = {}
        self._plan_flows()
        self._build_networks(build_cluster(cluster))

    def _edge_factor(self, a: tuple, b: tuple, kind: str) -> float:
        """Bandwidth divisor of a graph edge: a degraded port slows both directions of the GPU's link."""
        gpu = a[1] if a[0] == "gpu" else b[1] if b[0] == "gpu" else None
        return 1.0 if gpu is None or kind not in ("nic", "nvlink") else self.faults.link_factor(kind, gpu)

    # --- routes and networks ------------------------------------------------------------------------
    def _route(self, src: int, dst: int) -> tuple:
        if (src, dst) not in self._routes:
            self._routes[(src, dst)] = tuple(fault_path(self.cluster, src, dst, self._failed))
        return self._routes[(src, dst)]

    def _plan_flows(self) -> None:
        """Every route the step will use: PP to the neighbouring stages, DP rings, and each collective's
        per-member flows (planned once per place and kind of collective, replayed at every instance)."""
        w = self.workload
        keys = {w.task_key(stage, task) for stage in range(w.pp) for task in w.stage_order(stage)}
        kinds = {_signature(op): op for key in keys for op in w.task_ops(key) if op.is_comm}
        for place in self.places:
            for stage in {place.stage - 1, place.stage + 1, 0, w.pp - 1} - {place.stage}:  # 1F1B, interleaved, DualPipe
                if 0 <= stage < w.pp:
                    self.pp_links(place, place.at_stage(stage))
            if w.pp_split > 1:
                self.tp_ring_links(place)
            self.dp_links(place)
            if self.ranks.instances > 1:
                self.dp_outer_links(place)
            for signature, op in kinds.items():
                self._plans[(place, signature)] = self._plan(place, op)

    def _plan(self, place: Place, op: Op) -> list[tuple[tuple, float, float]]:
        """(route, share of the NVLink bytes, share of the NIC bytes) of each of ``place``'s flows for ``op``."""
        members, src = self._group(place, op), self._gpu[place]
        if len(members) == 1:
            return []
        gpn = self.cluster.gpus_per_node
        if op.collective != ALL_TO_ALL:  # ring: all to the successor
            return [(self._route(src, members[(members.index(src) + 1) % len(members)]), 1.0, 1.0)]
        if not op.nic_bytes:
            peers = [m for m in members if m != src]
            return [(self._route(src, dst), 1.0 / len(peers), 0.0) for dst in peers]
        node, rail = divmod(src, gpn)  # DeepEP: NVLink to node peers, NIC to the same rail of each other node
        local = [m for m in members if m != src and m // gpn == node]
        remote = [m for m in members if m // gpn != node and m % gpn == rail]
        if not remote:
            raise ValueError(f"{op.name}: GPU {src} has NIC bytes and no same-rail peer in another node")
        return [(self._route(src, dst), 1.0 / len(local), 0.0) for dst in local] + [
            (self._route(src, dst), 0.0, 1.0 / len(remote)) for dst in remote
        ]

    def _build_networks(self, graph) -> None:
        """One FluidNetwork per connected set of links that the planned routes couple.

        NOTE: for speed. Max-min fair rates decompose exactly over links that no flow couples, and each
        rate update then touches one node's NVLink or one rail's NICs instead of the whole cluster.
        """
        parent = {(a, b): (a, b) for a, b in graph.edges}

        def root(link):
            while parent[link] != link:
                parent[link] = parent[parent[link]]
                link = parent[link]
            return link

        for route in self._routes.values():
            for link in route[1:]:
                parent[root(link)] = root(route[0])
        components: dict[tuple, dict] = {}
        for a, b, data in graph.edges(data=True):
            capacity = data["bandwidth_Bps"] / self._edge_factor(a, b, data["kind"])
            components.setdefault(root((a, b)), {})[(a, b)] = capacity
        self.networks = [FluidNetwork(self.env, capacities) for capacities in components.values()]
        self._network_of = {link: net for net in self.networks for link in net.capacities_Bps}
        self.network = self.networks[0]

    def transfer(self, links: tuple, nbytes: float) -> simpy.Event:
        network = self._network_of[links[0]] if links else self.network
        if any(self._network_of[link] is not network for link in links):
            raise ValueError(f"route {links} couples links that _plan_flows did not plan together")
        return network.transfer(links, nbytes)

    def bytes_sent(self) -> dict:
        return {link: sent for network in self.networks for link, sent in network.bytes_sent.items()}

    # --- placement ----------------------------------------------------------------------------------
    def gpu(self, place: Place) -> int:
        return self._gpu[place]

    def compute_factor(self, place: Place) -> float:
        return self.faults.compute_factor(self._gpu[place])

    def pp_links(self, src: Place, dst: Place) -> tuple:
        return self._route(self._gpu[src], self._gpu[dst])

    def tp_ring_links(self, place: Place) -> tuple:
        group = self.ranks.members(place, TP)
        return self._route(self._gpu[place], self._gpu[group[(group.index(place) + 1) % len(group)]])

    def dp_links(self, place: Place) -> tuple:
        return self._route(self._gpu[place], self._gpu[self.ranks.dp_successor(place)])

    def dp_outer_links(self, place: Place) -> tuple:
        return self._route(self._gpu[place], self._gpu[self.ranks.dp_outer_successor(place)])

    def start_task(self, place, task, ops, costs, lanes, timing) -> simpy.Event:
        nic = costs.nic_bytes
        joined: dict[int, simpy.Event] = {}  # op index: the barrier's all-joined event (run_task's fused ops read it)

        def transfer(index: int, nbytes: float) -> simpy.Event:
            barrier = self._collective(place, task, ops[index], index, nbytes, nic[index] if nic else 0.0)
            joined[index] = barrier.joined
            return barrier.done

        return run_task(
            self.env, ops, costs, self.network, (), timing, transfer, lanes=lanes, joined=joined.__getitem__
        )

    # --- collectives --------------------------------------------------------------------------------
    def _group(self, place: Place, op: Op) -> tuple[int, ...]:
        """GPUs of ``place``'s group for ``op``, in ring order; checked once against the op's group size."""
        key = (place, group_kind(op))
        if key not in self._groups:
            self._members[key] = self.ranks.members(place, key[1])
            members = tuple(self._gpu[member] for member in self._members[key])
            gpn = self.cluster.gpus_per_node
            in_node = sum(1 for gpu in members if gpu // gpn == self._gpu[place] // gpn)
            if op.group_size not in (len(members), in_node):  # cross-node EP: group_size counts a node's
                raise ValueError(
                    f"{op.name}: group of {len(members)} GPUs ({in_node} in-node), op says {op.group_size}"
                )
            self._groups[key] = members
        return self._groups[key]

    def _join(self, key: tuple, size: int) -> tuple[_Barrier, bool]:
        """Count one member in at barrier ``key`` of ``size`` members; (the barrier, whether it was the last)."""
        barrier = self._barriers.get(key)
        if barrier is None:
            barrier = self._barriers[key] = _Barrier(0, self.env.event(), self.env.event())
        barrier.arrived += 1
        if barrier.arrived < size:
            return barrier, False
        del self._barriers[key]
        barrier.joined.succeed()
        return barrier, True

    def _end_when_landed(self, barrier: _Barrier, flows: list[simpy.Event]) -> simpy.Event:
        """Fire ``barrier.done`` once every one of ``flows`` has landed."""
        if flows:
            self.env.all_of(flows).callbacks.append(lambda _event: barrier.done.succeed())
        else:
            barrier.done.succeed()
        return barrier.done

    def _collective(self, place: Place, task: Task, op: Op, index: int, nbytes: float, nic_bytes: float) -> _Barrier:
        """Join the group's instance of this collective; the last member to arrive starts every flow."""
        kind = group_kind(op)
        members = self._members[(place, kind)]
        barrier, last = self._join((members[0], task, index), len(members))
        if not last:
            return barrier
        flows = []
        if nbytes > 0 or nic_bytes > 0:
            signature = _signature(op)
            for member in members:
                for route, nvl_share, nic_share in self._plans[(member, signature)]:
                    amount = nvl_share * nbytes + nic_share * nic_bytes
                    if amount > 0:
                        flows.append(self._network_of[route[0]].transfer(route, amount))
        self._end_when_landed(barrier, flows)
        return barrier

    def _dp_ring(self, place: Place, outer: bool = False) -> tuple[Place, ...]:
        """``place``'s DP ring (the cycle of RankMap.dp_successor through it; ``outer``: of dp_outer_successor, across
        the DP instances), in GPU order."""
        successor_of = self.ranks.dp_outer_successor if outer else self.ranks.dp_successor
        if (place, outer) not in self._dp_rings:
            cycle = [place]
            while (successor := successor_of(cycle[-1])) != place:
                cycle.append(successor)
            ring = tuple(sorted(cycle, key=self._gpu.__getitem__))  # one key per ring, whoever asks first
            for member in ring:
                self._dp_rings[(member, outer)] = ring
        return self._dp_rings[(place, outer)]

    def dp_transfer(self, place: Place, bucket: DpBucket, links: tuple, nbytes: float) -> simpy.Event:
        """A DP bucket is a ring collective (an NCCL all-gather or reduce-scatter, which every member must
        join): it starts when the ring's last member issues it, and ends for all when every hop has landed.

        NOTE: free-running flows instead let a fault-free replica's gradient buckets land on a straggler
        replica's NIC ingress while that replica still sends its last forward's PP activations (the 5.6 us
        of tests/unit/test_faults.py::test_folded_equals_unfolded_with_faults, SMALL, straggler 5, host_launch_s
        13.48 us: tests/toys.py SCENARIO_CALIBRATION), which no NCCL reduce-scatter does and the folded placement,
        whose replicas run in step, cannot show."""
        ring = self._dp_ring(place, bucket.outer)
        barrier, last = self._join((ring[0], bucket), len(ring))
        if not last:
            return barrier.done
        links_of = self.dp_outer_links if bucket.outer else self.dp_links
        return self._end_when_landed(barrier, [self.transfer(links_of(member), nbytes) for member in ring])


def _signature(op: Op) -> tuple[str, bool, bool]:
    """What sets a collective's flows: its group, whether it is an all-to-all, whether it uses the NIC."""
    return group_kind(op), op.collective == ALL_TO_ALL, op.nic_bytes > 0
