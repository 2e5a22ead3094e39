"""Where each GPU sits in the layout: the one numbering of GPUs, and the members of each kind of group.

A place is a (DP replica, pipeline stage, local rank). A replica's stage holds ``group`` = intra_size x cp
GPUs; local rank j = CP rank x intra_size + TP/SP rank (TP fastest, Megatron's order). The expert layers
see the stage's GPUs in the order L = replica x group + j with ETP fastest, then EP (Megatron-Core's
expert rank order): an expert group is ep x etp consecutive L's.

Numbering: replica outermost, then stage, then local rank, GPU = (replica x pp + stage) x group + j, with
one refinement so that expert groups stay on whole nodes: when a stage's group is smaller than a node
and its expert group larger, k = block / group replicas share a block of ``block`` GPUs (lcm of group
and the expert group, at most a node): GPU = ((d // k) x pp + s) x block + (d % k) x group + j. Without
that refinement stages would share the nodes that one stage's expert group needs. In both cases an
intra-node group never straddles nodes, the GPUs of a multi-node group sit on the same rails of
consecutive blocks, and with group = GPUs per node rank j sits on rail j.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from workloads.graph.step import StepWorkload
from workloads.ops import Group, Op


@dataclass(frozen=True, slots=True)
class Place:
    """What runs one stage's tasks: a GPU (unfolded) or a stage's representative (replica 0, rank 0)."""

    replica: int
    stage: int
    rank: int  # local rank within the replica's stage: CP rank x intra_size + TP/SP rank

    def at_stage(self, stage: int) -> Place:
        """The place of ``stage`` that exchanges pipeline data with this one (same replica and rank)."""
        return Place(self.replica, stage, self.rank)


# The GPU groups collectives run over (TP and Ulysses SP share the intra_size group); DP (x CP) and expert DP run
# the per-layer FSDP / ZeRO-3 gathers and ZeRO-2 scatters (workloads/graph/fsdp.py).
TP, CP, EP, ETP, DP, EDP = Group.TP, Group.CP, Group.EP, Group.ETP, Group.DP, Group.EDP


def group_kind(op: Op) -> Group:
    """The GPU group an op's collective runs over: EP, ETP, CP, DP, EDP, or the intra_size group of TP and SP."""
    return op.group if op.group in (EP, ETP, CP, DP, EDP) else TP


@dataclass(frozen=True)
class RankMap:
    """The GPU numbering of one layout on one cluster (see module docstring)."""

    pp: int
    dp: int
    n: int  # intra_size: TP / SP degree
    cp: int
    ep: int
    etp: int
    gpus_per_node: int
    instances: int = 1  # DP instances (workloads/specs/hybrid_dp.py): consecutive replicas, dp / instances each

    @classmethod
    def of(cls, workload: StepWorkload) -> RankMap:
        layout = workload.layout
        ep = layout.ep_degree if layout.ffn == "ep" else layout.intra_size
        return cls(
            workload.pp, workload.dp, layout.intra_size, layout.cp, ep, layout.etp, workload.gpus_per_node,
            layout.dp_instances,
        )  # fmt: skip

    @property
    def dp_inner(self) -> int:
        """Replicas of one DP instance."""
        return self.dp // self.instances

    @property
    def group(self) -> int:
        """GPUs of one replica's stage: intra_size x cp."""
        return self.n * self.cp

    @property
    def block(self) -> int:
        """GPUs numbered together for one stage: a replica's group, or whole expert groups up to a node."""
        if self.group >= self.gpus_per_node:
            return self.group
        return math.lcm(self.group, min(self.ep * self.etp, self.gpus_per_node))

    def gpu(self, place: Place) -> int:
        """Global GPU index of a place."""
        k = self.block // self.group
        return (
            ((place.replica // k) * self.pp + place.stage) * self.block + (place.replica % k) * self.group + place.rank
        )

    def place(self, gpu: int) -> Place:
        """The place of a global GPU index; inverse of ``gpu``."""
        k = self.block // self.group
        blocks, offset = divmod(gpu, self.block)
        outer, stage = divmod(blocks, self.pp)
        inner, rank = divmod(offset, self.group)
        return Place(outer * k + inner, stage, rank)

    def members(self, place: Place, kind: str) -> tuple[Place, ...]:
        """The places of ``place``'s group of ``kind`` (TP/SP, CP, EP, ETP, DP or EDP), in ring order."""
        return tuple(self._members(place, kind))

    def members_in_node(self, stage: int, kind: str) -> tuple[int, int]:
        """(members of the first replica's DP or EDP group of ``stage`` in its node, members in all). Its members'
        GPU numbers grow along the ring, so those in the node come first: counted in O(GPUs per node)."""
        first = Place(0, stage, 0)
        node = self.gpu(first) // self.gpus_per_node
        count = 0
        for member in self._members(first, kind):
            if self.gpu(member) // self.gpus_per_node != node:
                break
            count += 1
        return count, self.size(kind)

    def size(self, kind: str) -> int:
        """Members of a group of ``kind``: what ``members`` walks, without walking it."""
        if kind == DP:
            return self.dp_inner * self.cp
        if kind == EDP:
            return self._edp_span // (self.ep * self.etp)
        return {TP: self.n, CP: self.cp, EP: self.ep, ETP: self.etp}[kind]

    @property
    def _edp_span(self) -> int:
        """GPUs of one stage of one DP instance, numbered in the expert layers' order: one EDP group's stride."""
        return self.dp * self.group // self.instances

    def _members(self, place: Place, kind: str) -> Iterator[Place]:
        d, s, j = place.replica, place.stage, place.rank
        if kind == TP:
            base = j - j % self.n
            return (Place(d, s, base + r) for r in range(self.n))
        if kind == CP:
            return (Place(d, s, c * self.n + j % self.n) for c in range(self.cp))
        if kind == DP:  # the replicas (of its instance) and CP ranks of one TP rank: dense weights shard over DP x CP
            first = d - d % self.dp_inner
            replicas = range(first, first + self.dp_inner)
            return (Place(r, s, c * self.n + j % self.n) for r in replicas for c in range(self.cp))
        local = d * self.group + j  # the expert layers' order over the stage's GPUs
        experts = self.ep * self.etp
        if kind == EDP:  # the same position in every expert group of the stage (of its instance): its experts' replicas
            span = self._edp_span
            start = local - local % span + local % experts
            return (Place(i // self.group, s, i % self.group) for i in range(start, start + span, experts))
        if kind == EP:
            first = local - local % experts + local % self.etp
            locals_ = range(first, first + experts, self.etp)
        elif kind == ETP:
            first = local - local % self.etp
            locals_ = range(first, first + self.etp)
        else:
            raise ValueError(f"unknown group kind {kind!r}")
        return (Place(i // self.group, s, i % self.group) for i in locals_)

    def dp_successor(self, place: Place) -> Place:
        """Next place on ``place``'s DP ring: the same stage and local rank in the next replica; with one
        replica, the next CP rank (dense gradients reduce over DP x CP). A ring over every replica and CP
        rank would put a hop between rails, and its PXN detour on a neighbour's NIC, on each wrap."""
        if self.dp > 1:  # inside its DP instance
            first = place.replica - place.replica % self.dp_inner
            return Place(first + (place.replica - first + 1) % self.dp_inner, place.stage, place.rank)
        cp_rank, tp_rank = divmod(place.rank, self.n)
        return Place(place.replica, place.stage, (cp_rank + 1) % self.cp * self.n + tp_rank)

    def dp_outer_successor(self, place: Place) -> Place:
        """Next place on ``place``'s ring across the DP instances: the same position in the next instance."""
        return Place((place.replica + self.dp_inner) % self.dp, place.stage, place.rank)
