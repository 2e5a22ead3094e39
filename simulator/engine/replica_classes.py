"""Which DP replicas a degraded NIC slows: the folded view's two classes of replica.

One folded representative per stage stands for every replica (simulator/engine/placement.py). A degraded NIC is
one GPU's; the folded view used to charge it to every replica of the GPU's stage, where in the unfolded run
(simulator/engine/unfolded.py) only the replicas that wait for that GPU run at its pace: its own replica (its
PP sends and, under the interleaved schedule, each chunk's gradient reduce-scatter share the slow NIC), the
replicas whose hops leave by that NIC over NCCL's PXN (topologies.gpu_path: a hop leaves by the NIC of the
sender's node on the receiver's rail), and the replicas that share an expert group (EP or ETP, whose
all-to-alls are barriers) with any of those. The others run at a healthy pace and meet the slow ones only at
the DP buckets, ring collectives that every member joins (NCCL all-gather and reduce-scatter). Measured before
these classes: 2.09% (a dense model, interleaved) and 4.6% (expert groups joining replicas in a node) between
the two views, issue 42 (tests/differential/test_degraded_nic.py).

So where the faults are degraded NICs only and they slow a strict subset of the replicas, the folded view runs
two representatives per stage: class 0 (``SLOW``) for the slowed replicas, with the stage's folded faults, and
class 1 (``HEALTHY``) for the rest, on links of its own, the two joined at every DP bucket. The cost is about twice
the one-class fold's (2.2 times on paper-352b at 1,440 GPUs, a full step), whatever the DP degree, the GPUs per
node or the micro-batches.
"""

from __future__ import annotations

from simulator.engine.faults import Faults, hop_peers
from simulator.engine.ranks import EP, ETP, Place, RankMap
from topologies.cluster import ClusterSpec

SLOW, HEALTHY = 0, 1  # a folded place's replica field names its class


def slow_replicas(
    faults: Faults, cluster: ClusterSpec, ranks: RankMap, experts: bool, wraps: bool = False
) -> frozenset[int] | None:
    """The replicas that run at a degraded NIC's pace (see the module docstring), or None where folding keeps
    one class: other kinds of fault (their folded views have their own bounds, tests/differential/bounds.py),
    one replica, or every replica slowed. ``experts``: the model has expert layers (EP / ETP groups couple
    replicas); ``wraps``: the last stage and the first send to each other (interleaved)."""
    if ranks.dp == 1 or not faults.degraded or faults.stragglers or faults.failed or faults.speed_spread:
        return None
    if any(kind != "nic" for kind, _, _ in faults.degraded):
        return None
    gpn = cluster.gpus_per_node
    todo = []
    for _, gpu, _ in faults.degraded:
        todo.append(ranks.place(gpu).replica)
        node, rail = divmod(gpu, gpn)
        for sender in range(node * gpn, (node + 1) * gpn):  # hops that leave by this NIC come from its node
            place = ranks.place(sender)
            targets = (ranks.gpu(peer) for _, peer in hop_peers(ranks, place, wraps))
            if any(peer // gpn != node and peer % gpn == rail for peer in targets):
                todo.append(place.replica)
    slow: set[int] = set()
    while todo:  # close over the expert groups: every replica an all-to-all of a slow one waits for
        replica = todo.pop()
        if replica in slow:
            continue
        slow.add(replica)
        if experts:
            for rank in range(ranks.group):
                for kind in (EP, ETP):
                    todo.extend(member.replica for member in ranks.members(Place(replica, 0, rank), kind))
    return frozenset(slow) if len(slow) < ranks.dp else None
