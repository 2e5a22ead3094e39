"""Placements: which places run a stage's tasks, and which links their traffic loads.

The pipeline (simulator/engine/engine.py) is the same for every placement; a placement answers where things
run: its places, the links of a PP send and of a DP transfer, and how a task's collectives move bytes.

Folded (symmetry folding): with balanced routing the GPUs of a stage do the same work at the
same time and every DP replica copies every other, so one representative per stage (replica 0, rank 0)
stands for all. Its links stand for every member's: an intra-node collective moves each member's egress
bytes over the representative's NVLink, and PP sends and DP buckets share its NIC. Cost therefore grows
with stages x micro-batches, not with the GPU count. The unfolded placement (simulator/engine/unfolded.py)
simulates every GPU and flow, and checks this one (tests/differential/test_unfolded.py).

Where stages or replicas share a node (a replica's stage smaller than the node), PP sends and DP hops inside
the node share the representative's NVLink port (``nvl_out`` / ``nvl_in``) with each other and with the PXN
detours through it, and a hop between nodes on different rails leaves by the NIC of the GPU on the
receiver's rail (NCCL's PXN, topologies.gpu_path), another stage's. The stage's own collectives keep an
NVLink of their own (``nvl``), so that a task can be timed once and replayed (simulator/engine/timer.py):
there the folded step is within a stated bound of the unfolded one (tests/differential/test_shared_nodes.py).

Faults (simulator/engine/faults.py) break symmetry; the folded representative of an affected stage becomes its
slowest member: a straggler's factor scales the stage's compute kernels, a degraded port divides the
stage's NVLink or NIC capacity, a failed NIC leaves the stage 1/k of a NIC shared by k GPUs. This assumes
every member of a stage waits for the slowest (each intra-node collective is a barrier, so the whole group
runs at the straggler's pace), that DP rings and PP transfers run at their slowest member's pace (every
replica's stage is charged the fault: a DP bucket is a ring collective, so a fault-free replica's buckets
wait for the slow one's, as UnfoldedPlacement.dp_transfer makes them), and that a failed NIC's detour over
NVLink costs NVLink nothing. A degraded NIC that slows only some replicas is the exception: those replicas fold
into one class and the others into a healthy class with links of their own, two representatives per stage joined
at every DP bucket (simulator/engine/replica_classes.py).
"""

from __future__ import annotations

from typing import NamedTuple

import simpy

from simulator.engine.faults import Faults, StageFault
from simulator.engine.ranks import Place, RankMap, group_kind
from simulator.engine.replica_classes import HEALTHY, SLOW, slow_replicas
from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import OpCosts
from simulator.streams.tasks import TaskTiming, run_task
from topologies.cluster import ClusterSpec
from workloads.graph.step import StepWorkload
from workloads.ops import ALL_TO_ALL, Group, Op
from workloads.schedules.base import Task


def _wraps(workload: StepWorkload) -> bool:
    """Whether the last stage sends to the first (interleaved chunks), which a fault's folded view needs."""
    last = workload.pp - 1
    if last == 0 or workload.chunks == 1:
        return False
    return any(flow.stage == 0 for task in workload.stage_order(last) for flow in workload.schedule.outputs(last, task))


HEALTHY_STAGE = StageFault()  # what the healthy class's representatives are charged: nothing


def _at(link: str, stage: int, cls: int) -> tuple:
    """The folded link ``link`` of ``stage``'s representative in replica class ``cls``: the slow (or only) class's
    keep their names, the healthy class's are named apart."""
    return (link, stage) if cls == SLOW else (link, stage, cls)


class DpBucket(NamedTuple):
    """One DP bucket of a step: a parameter all-gather or a gradient reduction (``kind``, as in probes.Transfer)."""

    kind: str  # "dp-params" | "dp-grads"
    index: int
    outer: bool = False  # across the DP instances (workloads/specs/hybrid_dp.py), else inside one


class Placement:
    """Where a step runs: places, the links of PP and DP traffic, and how tasks move their bytes."""

    kind = ""
    memoizable = False  # whether a task may be timed once per key and replayed (simulator/engine/timer.py)

    def __init__(self, env: simpy.Environment, workload: StepWorkload, cluster: ClusterSpec, faults: Faults) -> None:
        faults.validate(cluster)
        self.env, self.workload, self.cluster, self.faults = env, workload, cluster, faults
        self.ranks = RankMap.of(workload)
        self.stage_faults: list[StageFault] = faults.stage_faults(
            cluster, self.ranks, bool(faults) and _wraps(workload)
        )
        self.places: tuple[Place, ...] = ()
        self.network: FluidNetwork
        self.networks: list[FluidNetwork] = []  # every network of the step (probes watch each)

    def compute_factor(self, place: Place) -> float:
        """How many times longer ``place``'s compute kernels take."""
        raise NotImplementedError

    def pp_links(self, src: Place, dst: Place) -> tuple:
        """Links a PP send from ``src`` to ``dst`` loads."""
        raise NotImplementedError

    def tp_ring_links(self, place: Place) -> tuple:
        """Links ``place``'s hop of a ring over its TP group loads (a split PP send's all-gather)."""
        raise NotImplementedError

    def dp_links(self, place: Place) -> tuple:
        """Links ``place``'s DP parameter gathers and gradient reductions load (inside its DP instance)."""
        raise NotImplementedError

    def dp_outer_links(self, place: Place) -> tuple:
        """Links ``place``'s reductions across the DP instances load (workloads/specs/hybrid_dp.py)."""
        raise NotImplementedError

    def start_task(
        self,
        place: Place,
        task: Task,
        ops: tuple[Op, ...],
        costs: OpCosts,
        lanes: tuple[int, ...] | None,
        timing: TaskTiming,
    ) -> simpy.Event:
        """Start ``task``'s ops at op level in the shared environment; the event fires when all are done."""
        raise NotImplementedError

    def transfer(self, links: tuple, nbytes: float) -> simpy.Event:
        """Start moving ``nbytes`` over ``links`` (a PP send or DP bucket); fires when the last byte lands."""
        return self.network.transfer(links, nbytes)

    def dp_transfer(self, place: Place, bucket: DpBucket, links: tuple, nbytes: float) -> simpy.Event:
        """``place``'s share of one DP bucket (``nbytes`` over its ``links``); fires when the bucket is done for
        ``place``. Folded: one flow, which stands for every replica's (they run in step)."""
        return self.transfer(links, nbytes)

    def bytes_sent(self) -> dict:
        """Bytes sent over each link so far."""
        return dict(self.network.bytes_sent)


def dp_spine_factor(cluster: ClusterSpec, ranks: RankMap, stage: int) -> float:
    """How many times slower than its NIC ``stage``'s DP ring runs for want of leaf uplink (>= 1).

    A leaf's uplink to its rail's spine carries nodes_in_pod NICs' worth / leaf_oversubscription
    (topologies.cluster.build_cluster). The ring runs replica d -> d + 1 (RankMap.dp_successor); a fraction f
    of its hops leaves the pod. With every node of the pod syncing at once, each GPU's DP flow gets 1 / (o f)
    of a NIC on the uplink: max(1, o f), exact where the replicas spread evenly over the pods and sync together
    (the unfolded placement routes every hop over the graph: tests/differential/test_fabric.py), pessimistic where the
    pod's stages sync at different times. PP sends and cross-node EP / CP between pods are not charged the
    spine here (the unfolded graph charges them)."""
    oversubscription = cluster.leaf_oversubscription
    if oversubscription <= 1 or cluster.num_pods == 1 or ranks.dp == 1:
        return 1.0
    per_pod = cluster.gpus_per_node * cluster.nodes_per_leaf
    pods = [ranks.gpu(Place(replica, stage, 0)) // per_pod for replica in range(ranks.dp)]
    crossing = sum(pods[d] != pods[(d + 1) % ranks.dp] for d in range(ranks.dp)) / ranks.dp
    return max(1.0, oversubscription * crossing)


class FoldedPlacement(Placement):
    """One representative GPU per stage (replica 0, rank 0), its NIC and NVLink standing for all."""

    kind = "folded"

    def __init__(self, env: simpy.Environment, workload: StepWorkload, cluster: ClusterSpec, faults: Faults) -> None:
        super().__init__(env, workload, cluster, faults)
        # Memoization is exact only while tasks stay off the NIC; cross-node EP (and CP across nodes) put
        # task traffic on the NIC beside PP sends and DP buckets, so such tasks run at op level.
        self.memoizable = not workload.tasks_use_nic
        # Where a degraded NIC slows some replicas only, a second representative per stage for the healthy ones
        # (simulator/engine/replica_classes.py): places (class, stage, 0), the healthy class's links named apart
        slow = slow_replicas(
            faults, cluster, self.ranks, workload.model.num_experts > 0, bool(faults) and _wraps(workload)
        )
        self.classes = (SLOW,) if slow is None else (SLOW, HEALTHY)
        self.places = tuple(Place(cls, stage, 0) for cls in self.classes for stage in range(workload.pp))
        capacities = {}
        self._slowed: dict[tuple, tuple] = {}  # (kind of traffic, stage[, class]): the slow port link it adds
        for cls in self.classes:
            for stage in range(workload.pp):
                capacities.update(self._stage_capacities(stage, cls))
        self.network = FluidNetwork(env, capacities)
        self._capacities = self.network.capacities_Bps
        # NOTE: each stage's NVLink carries only that stage's collectives, so it gets a network of its own:
        # max-min rates decompose over disjoint links, and small networks keep rate updates cheap. Tasks that
        # also use the NIC (cross-node EP) move their NIC bytes as flows of their own on the NIC network, so
        # no flow spans both.
        self._nvlink_networks = [
            [FluidNetwork(env, {_at("nvl", stage, cls): self._nvlink_Bps(stage, cls)}) for stage in range(workload.pp)]
            for cls in self.classes
        ]
        self.nvlink_networks = self._nvlink_networks[SLOW]
        self.networks = list(dict.fromkeys([self.network, *(n for nets in self._nvlink_networks for n in nets)]))
        self._pp_routes: dict[tuple[int, int, int], tuple] = {}
        self._nic_flow_counts: dict[tuple[int, int], tuple] = {}  # (stage, id of a task's ops): (ops, flows)
        self._peer_nodes: dict[tuple[int, Group], int] = {}  # (stage, group kind): other nodes of its group
        self._dp_joined: dict[tuple[int, DpBucket], tuple[simpy.Event, tuple]] = {}  # the first class's, per bucket

    def _fault(self, stage: int, cls: int) -> StageFault:
        """What the representative of ``stage`` in class ``cls`` is charged: the stage's folded faults, none for
        the healthy class."""
        return self.stage_faults[stage] if cls == SLOW else HEALTHY_STAGE

    def _stage_capacities(self, stage: int, cls: int) -> dict:
        """The NIC-network links of ``stage``'s representative in class ``cls`` and their capacities."""
        cluster, fault, nic_Bps = self.cluster, self._fault(stage, cls), self.cluster.nic_effective_Bps
        capacities = {_at("nic_out", stage, cls): nic_Bps / fault.nic_factor}
        capacities[_at("nic_in", stage, cls)] = nic_Bps / fault.nic_factor
        # PP sends and DP hops between GPUs of one node (scale-up domains larger than a stage, or replicas
        # sharing one) use the GPU's NVLink port, egress and ingress, as do PXN detours through it
        capacities[_at("nvl_out", stage, cls)] = capacities[_at("nvl_in", stage, cls)] = self._nvlink_Bps(stage, cls)
        spine = dp_spine_factor(cluster, self.ranks, stage)
        if spine > 1:  # an oversubscribed leaf uplink
            capacities[_at("spine_dp", stage, cls)] = nic_Bps / spine
        for tag, factor in fault.nic_traffic:  # a slow NIC that carries some kinds of traffic only
            # NOTE: one link per direction for every kind it carries: they share the one port (a link per kind gave
            # each kind the whole slow port, 27% fast with EP and PP sends on a NIC degraded 16 times, issue 42)
            end = self._slowed[_at(tag, stage, cls)] = _at("nic_slow_" + tag.rsplit("_", 1)[1], stage, cls)
            capacities[end] = min(capacities.get(end, nic_Bps), nic_Bps / factor)
        if fault.nic_degraded_port and len(self.classes) == 1:  # the ring neighbours' healthy NICs (dp_transfer)
            capacities[("nic_peer_out", stage)] = capacities[("nic_peer_in", stage)] = nic_Bps
            if spine > 1:
                capacities[("spine_dp_peer", stage)] = nic_Bps / spine
        return capacities

    def _nvlink_Bps(self, stage: int, cls: int = SLOW) -> float:
        return self.cluster.gpu.nvlink_bandwidth_Bps / self._fault(stage, cls).nvlink_factor

    def compute_factor(self, place: Place) -> float:
        return self._fault(place.stage, place.replica).compute_factor

    def _gpu_of(self, stage: int) -> int:
        return self.ranks.gpu(Place(0, stage, 0))

    def _cross_node_links(
        self, src: int, dst: int, src_stage: int, dst_stage: int, kind: str, src_cls: int = SLOW, dst_cls: int = SLOW
    ) -> tuple:
        """The folded links of a hop from GPU ``src`` (of ``src_stage``) to GPU ``dst`` (of ``dst_stage``) in
        another node: its NIC on the same rail, else NCCL's PXN detour (topologies.gpu_path) over NVLink to the
        GPU of the source node on the destination's rail and out of that GPU's NIC. That proxy belongs to
        some stage (stages share the node); by symmetry its NVLink ingress and NIC are that stage's
        representative's: each GPU of the sending stage has its own proxy, on its own destination's rail. ``kind``
        ("pp" | "dp"): a degraded NIC that carries only some kinds of traffic adds its port, one link each way
        (StageFault.nic_traffic). ``src_cls`` / ``dst_cls``: the replica classes of the two ends."""
        gpn = self.cluster.gpus_per_node
        if src % gpn == dst % gpn:
            links: tuple = (_at("nic_out", src_stage, src_cls), _at("nic_in", dst_stage, dst_cls))
            out = src_stage
        else:
            out = self.ranks.place(src // gpn * gpn + dst % gpn).stage
            links = (
                _at("nvl_out", src_stage, src_cls),
                _at("nvl_in", out, src_cls),
                _at("nic_out", out, src_cls),
                _at("nic_in", dst_stage, dst_cls),
            )
        ends = (_at(f"{kind}_out", out, src_cls), _at(f"{kind}_in", dst_stage, dst_cls))
        return links + tuple(self._slowed[end] for end in ends if end in self._slowed)

    def pp_links(self, src: Place, dst: Place) -> tuple:
        route = (src.stage, dst.stage, src.replica)
        if route not in self._pp_routes:  # NOTE: once per stage pair and class, not per send
            a, b, cls = self._gpu_of(src.stage), self._gpu_of(dst.stage), src.replica
            gpn = self.cluster.gpus_per_node
            self._pp_routes[route] = (
                (_at("nvl_out", src.stage, cls), _at("nvl_in", dst.stage, cls))  # both in one scale-up domain
                if a // gpn == b // gpn
                else self._cross_node_links(a, b, src.stage, dst.stage, "pp", cls, cls)
            )
        return self._pp_routes[route]

    def tp_ring_links(self, place: Place) -> tuple:
        # the representative's NVLink egress and ingress on the NIC network, as a PP send inside a node takes them
        return _at("nvl_out", place.stage, place.replica), _at("nvl_in", place.stage, place.replica)

    def dp_links(self, place: Place) -> tuple:
        """Where the ring (over the first DP instance: all alike) stays in the representative's scale-up domain,
        every hop on NVLink. Else a bucket ends at its slowest hop, a cross-node one: the ring's wrap from its last
        member back to the first (its members' GPU numbers grow along the ring, RankMap.dp_successor, so that hop
        crosses nodes; O(1) at any DP degree), its NIC on one rail or over PXN. With two replica classes, the hop
        from ``place``'s class into the other's."""
        ranks = self.ranks
        last = (
            Place(ranks.dp_inner - 1, place.stage, 0)
            if ranks.dp > 1
            else Place(0, place.stage, (ranks.cp - 1) * ranks.n)
        )
        return self._ring_wrap(place, last)

    def dp_outer_links(self, place: Place) -> tuple:
        """The ring across the DP instances, as ``dp_links``: its wrap from the last instance's first replica."""
        return self._ring_wrap(place, Place(self.ranks.dp - self.ranks.dp_inner, place.stage, 0))

    def _ring_wrap(self, place: Place, last: Place) -> tuple:
        """The links of a DP ring's slowest hop, from ``last`` back to replica 0 (see ``dp_links``)."""
        stage, ranks, gpn = place.stage, self.ranks, self.cluster.gpus_per_node
        cls = place.replica
        into = self.classes[-1 - cls]  # the other class, or this one where there is one
        first, last_gpu = ranks.gpu(Place(0, stage, 0)), ranks.gpu(last)
        if first // gpn == last_gpu // gpn:
            return _at("nvl_out", stage, cls), _at("nvl_in", stage, into)
        links = self._cross_node_links(last_gpu, first, stage, stage, "dp", cls, into)
        spine = _at("spine_dp", stage, cls)
        return (*links, spine) if spine in self._capacities else links

    def dp_transfer(self, place: Place, bucket: DpBucket, links: tuple, nbytes: float) -> simpy.Event:
        """One flow over the stage's NIC egress and ingress stands for the hop each replica sends and the one it
        receives: alike where every replica's NIC is. A degraded port (StageFault.nic_degraded_port) is one GPU's:
        the hop it sends leaves by its slow NIC into its ring successor's healthy one, the hop it receives leaves
        its predecessor's healthy NIC into its slow one, two flows (as UnfoldedPlacement.dp_transfer moves them),
        each slowed at one end only. One flow over both slow ends would run at the lesser of the two ends' shares
        where PP sends load them unevenly (+2.7% on the step at a 2 GB/s NIC degraded by 4, issue 42).

        With two replica classes (simulator/engine/replica_classes.py) those ends are the classes' own NICs, which
        carry each class's PP sends at its own times: the bucket, a ring collective, starts when the second
        class issues it, as the first flow from each class into the other, and ends for both when both land."""
        if len(self.classes) > 1:
            return self._dp_between_classes(place, bucket, links, nbytes)
        stage = place.stage
        out, into = ("nic_out", stage), ("nic_in", stage)
        if not self.stage_faults[stage].nic_degraded_port or links[:2] != (out, into):
            return self.transfer(links, nbytes)
        spine = (("spine_dp_peer", stage),) if ("spine_dp", stage) in links else ()
        sent = self.network.transfer((out, ("nic_peer_in", stage), *links[2:]), nbytes)
        received = self.network.transfer((("nic_peer_out", stage), into, *spine), nbytes)
        return self.env.all_of((sent, received))

    def _dp_between_classes(self, place: Place, bucket: DpBucket, links: tuple, nbytes: float) -> simpy.Event:
        """The two classes' bucket: the first class to issue it waits; the second starts both hops."""
        key = (place.stage, bucket)
        joined = self._dp_joined.pop(key, None)
        if joined is None:
            done = self.env.event()
            self._dp_joined[key] = (done, links)
            return done
        done, first_links = joined
        hops = self.env.all_of((self.transfer(first_links, nbytes), self.transfer(links, nbytes)))
        hops.callbacks.append(lambda _event: done.succeed())
        return done

    def nic_links(self, stage: int, cls: int = SLOW) -> tuple:
        """The links a task of ``stage`` (in class ``cls``) moves its NIC bytes over (cross-node EP, CP across
        nodes)."""
        ends = (_at("ep_out", stage, cls), _at("ep_in", stage, cls))
        return (
            _at("nic_out", stage, cls),
            _at("nic_in", stage, cls),
            *(self._slowed[end] for end in ends if end in self._slowed),
        )

    def start_task(self, place, task, ops, costs, lanes, timing) -> simpy.Event:
        stage, cls = place.stage, place.replica
        return run_task(
            self.env,
            ops,
            costs,
            self._nvlink_networks[cls][stage],
            (_at("nvl", stage, cls),),
            timing,
            lanes=lanes,
            nic_links=self.nic_links(stage, cls),
            nic_network=self.network,
            nic_flows=self._nic_flows(stage, ops, costs),
        )

    def _nic_flows(self, stage: int, ops: tuple[Op, ...], costs: OpCosts) -> tuple[int, ...]:
        """Per op, the flows its NIC bytes leave the representative in (run_task): an all-to-all's, one to its
        same-rail peer in each other node of its group, as UnfoldedPlacement._plan moves them (DeepEP's and NCCL's
        cross-node all-to-all alike); a ring's (CP across nodes), one to its successor. Max-min fairness shares a
        NIC per flow: one flow standing for k would get 1/2 of a NIC beside a PP send where the k get k/(k+1)
        (3% on the step at a 2 GB/s NIC, EP 16 over 4 nodes, issue 42)."""
        if not costs.nic_bytes:
            return ()
        cached = self._nic_flow_counts.get((stage, id(ops)))
        if cached is not None and cached[0] is ops:
            return cached[1]
        flows = []
        for op, nbytes in zip(ops, costs.nic_bytes):
            flows.append(self._peer_node_count(stage, group_kind(op)) if nbytes and op.collective == ALL_TO_ALL else 1)
        self._nic_flow_counts[(stage, id(ops))] = (ops, tuple(flows))
        return tuple(flows)

    def _peer_node_count(self, stage: int, kind: Group) -> int:
        """The other nodes the representative's group of ``kind`` at ``stage`` spans (at least 1), once per pair."""
        key = (stage, kind)
        if key not in self._peer_nodes:
            gpn, rep = self.cluster.gpus_per_node, Place(0, stage, 0)
            nodes = {self.ranks.gpu(member) // gpn for member in self.ranks.members(rep, kind)}
            self._peer_nodes[key] = max(1, len(nodes) - 1)
        return self._peer_nodes[key]

    def bytes_sent(self) -> dict:
        sent = dict(self.network.bytes_sent)
        for network in self.networks:
            if network is not self.network:
                sent.update(network.bytes_sent)
        return sent
