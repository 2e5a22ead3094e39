"""Cross-node expert parallelism with node-limited routing (DeepSeek-V3 Sec. 3.2.2, DeepEP): byte counts.

A token picks k of E experts; the EP group spans N nodes of G GPUs each (E/N experts per node, E/(NG)
per GPU). Node-limited routing first selects at most M nodes, then the top-k experts on them. A token
crosses the NIC once per destination node other than its own (to the GPU of its own rail there) and
is then forwarded over NVLink to the GPUs holding its experts in that node (DeepEP internode dispatch).
NCCL's all-to-all (Megatron-Core's alltoall dispatcher) deduplicates nothing: it sends every routed copy
to its expert's rank, so a token crosses the NIC once per routed expert on another node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import comb

from workloads.dispatchers.base import Wire
from workloads.dispatchers.registry import DISPATCHERS
from workloads.ops import BYTES_BF16
from workloads.specs.routing import RoutingStats, consecutive_units


@dataclass(frozen=True)
class EpBytes:
    """Per-GPU egress of one dispatch (= one combine) of a micro-batch, in bytes."""

    nic_bytes: float  # over the GPU's NIC to other nodes
    nvlink_bytes: float  # over its NVLink port: own tokens to node peers, and forwarded arrivals
    expected_nodes: float  # D: distinct nodes a token reaches
    remote_nodes: float  # D (N - 1) / N: of them, nodes other than its own


def expected_nodes(num_experts: int, top_k: int, nodes: int, max_nodes: int) -> float:
    """Expected distinct nodes among a token's k uniformly routed experts, limited to M nodes.

    With m = min(M, N) selected nodes (M = 0: m = N) and E_n = E/N experts per node, the k experts are
    k distinct picks among the m E_n experts of the selected nodes; a selected node is missed with the
    hypergeometric probability C((m-1) E_n, k) / C(m E_n, k), so D = m (1 - C((m-1) E_n, k) / C(m E_n, k)).
    """
    per_node = num_experts // nodes
    m = nodes if max_nodes <= 0 else min(max_nodes, nodes)
    pool = m * per_node
    if top_k > pool:
        raise ValueError(f"top_k={top_k} exceeds the {pool} experts of {m} nodes")
    return m * (1.0 - comb(pool - per_node, top_k) / comb(pool, top_k))


def ep_dispatch_bytes(
    tokens_local: int,
    hidden_size: int,
    top_k: int,
    num_experts: int,
    ep: int,
    gpus_per_node: int,
    max_nodes: int = 0,
    bytes_per_element: int = BYTES_BF16,
    routing: str = "uniform",
) -> EpBytes:
    """Per-GPU NIC and NVLink egress of one EP dispatch with node-limited routing (uniform routing).

    N = ep / G nodes with G = min(ep, gpus_per_node). The selected nodes are uniform, so a token's own
    node is among its D nodes with probability 1/N of the total: remote nodes = D (N - 1) / N, and
    NIC egress = tokens x h x bytes x D (N - 1) / N (one copy per remote node; by symmetry each GPU
    receives as much as it sends). On NVLink each of the k copies moves unless its expert sits on the
    GPU it arrived at (the sender for its own node, the same-rail GPU for a remote node), probability
    1/G, so NVLink egress = tokens x h x bytes x k (G - 1) / G, counting the arrivals each GPU forwards
    for its peers. With N = 1 this is the paper's Eq. 3; copies are not deduplicated per GPU. Under "consecutive"
    routing D is the nodes a token's adjacent experts span (workloads/specs/routing.py consecutive_units).
    """
    g = min(ep, gpus_per_node)
    nodes = ep // g
    token_bytes = tokens_local * hidden_size * bytes_per_element
    d = distinct_units(num_experts, top_k, nodes, max_nodes, routing)
    remote = d * (nodes - 1) / nodes
    return EpBytes(token_bytes * remote, token_bytes * top_k * (g - 1) / g, d, remote)


def nccl_all_to_all_bytes(
    tokens_local: int,
    hidden_size: int,
    top_k: int,
    ep: int,
    gpus_per_node: int,
    bytes_per_element: int = BYTES_BF16,
) -> EpBytes:
    """Per-GPU NIC and NVLink egress of one EP dispatch as NCCL's all-to-all moves it (uniform routing).

    Megatron-Core's MoEAlltoAllTokenDispatcher (megatron/core/transformer/moe/token_dispatcher.py) permutes
    the tokens into one row per (token, routed expert) and all-to-alls the rows to the experts' ranks: each
    of the k copies goes to its own rank, with no per-node deduplication. A copy's rank is uniform over the
    N G ranks, so (N - 1) / N of the k copies leave the node: NIC egress = tokens x h x bytes x k (N - 1) / N.
    NCCL's PXN (NCCL 2.12, on by default) first moves a remote copy over NVLink to the node's GPU on the
    destination's rail unless that is the sender, (G - 1) / G of them; with the (G - 1) / (N G) of the copies
    to node peers, NVLink egress = tokens x h x bytes x k (G - 1) / G, DeepEP's. ``expected_nodes`` and
    ``remote_nodes`` count the copies that cross it: k and k (N - 1) / N.
    """
    g = min(ep, gpus_per_node)
    nodes = ep // g
    token_bytes = tokens_local * hidden_size * bytes_per_element
    remote = top_k * (nodes - 1) / nodes
    return EpBytes(token_bytes * remote, token_bytes * top_k * (g - 1) / g, float(top_k), remote)


def distinct_units(num_experts: int, top_k: int, units: int, max_units: int, routing: str) -> float:
    """Expected distinct units (nodes or ranks) among a token's k experts: ``expected_nodes`` for random routing,
    ``consecutive_units`` for "consecutive" routing's adjacent experts."""
    if routing == "consecutive":
        return consecutive_units(num_experts, top_k, units)
    return expected_nodes(num_experts, top_k, units, max_units)


def rank_copies_bytes(
    tokens_local: int,
    hidden_size: int,
    top_k: int,
    num_experts: int,
    ranks: int,
    max_ranks: int = 0,
    routing: str = "uniform",
) -> float:
    """Per-GPU NVLink egress of one dispatch inside one node when a token goes once to each rank holding any
    of its experts (DeepEP's intranode dispatch and HybridEP send a token once per destination rank and expand
    it to its local experts there; deepseek-ai/DeepEP csrc/kernels/intranode.cu): the expected distinct ranks
    among its k uniformly routed experts (``expected_nodes`` with ranks for nodes; ``max_ranks``: group-limited
    routing, Megatron's --moe-router-group-topk, its groups taken as ranks as they are taken as nodes across
    nodes), of which (g - 1) / g are other ranks. DeepSeek-like routing (E 32 on 8 ranks, top-8 within 4
    groups) sends 3.85 copies where NCCL's all-to-all sends 8; Mixtral-like (E 8, top-2) sends 2 either way.
    Under "consecutive" routing the ranks a token's adjacent experts span (``distinct_units``)."""
    d = distinct_units(num_experts, top_k, ranks, max_ranks, routing)
    return tokens_local * hidden_size * BYTES_BF16 * d * (ranks - 1) / ranks


@dataclass(frozen=True)
class EpPlan:
    """Where every EP number of one MoE layer comes from: the group, the dispatch and its per-GPU bytes.

    Dispatch egress per GPU (= combine egress) of one micro-batch, scaled to the busiest GPU under
    skewed routing: inside one node MegaScale-MoE Eq. 3 ((g-1)/g of the routed copies) or, with top-k
    above the threshold, the all-gather of the g members' tokens (Sec. 3.2, Fig. 6/7); across nodes
    DeepEP's NIC + NVLink bytes with node-limited routing (``ep_dispatch_bytes``), or NCCL's all-to-all's
    (``nccl_all_to_all_bytes``) under the alltoall dispatcher.
    """

    degree: int  # EP ranks of the group
    dispatcher: str  # the token dispatcher (workloads/dispatchers; LayoutSpec.token_dispatcher)
    members_per_node: int  # g: EP ranks of the group inside one node
    nodes: int  # nodes the group spans
    all_gather: bool  # dispatch as all-gather + reduce-scatter instead of all-to-all
    nvlink_bytes: float  # dispatch egress per GPU over NVLink
    nic_bytes: float  # dispatch egress per GPU over the NIC (cross-node EP)
    experts_local: int  # experts per EP rank
    rows_per_expert: int  # rows of each expert's GEMM (capacity-padded, or the busiest GPU's if dropless)
    routed_bytes: float  # token copies this GPU sends, before the (g-1)/g of Eq. 3, busiest-GPU scaled
    dropped_fraction: float  # share of copies dropped by the capacity limit


def ep_plan(
    *,
    num_experts: int,
    top_k: int,
    hidden_size: int,
    tokens_local: int,
    group_tokens: int,
    degree: int,
    ranks_per_node: int,
    etp: int,
    all_gather: bool,
    max_nodes: int,
    capacity_factor: float,
    dropless: bool = False,
    stats: RoutingStats | None = None,
    dispatcher: str = "megascale",
    routing: str = "uniform",
) -> EpPlan:
    """The EP plan of one MoE layer for ``tokens_local`` tokens per GPU (``stats``: skewed routing).

    ``group_tokens``: the tokens of the g members of the group in one node (the all-gather's input).
    With ETP each expert's GEMM sees the etp members' copies: etp x the rows. The dispatcher's wire sets the
    copies: across nodes one per remote copy (NCCL), per remote node (DeepEP), or every member's tokens (an
    all-gather over the whole group, each GPU sending n - 1 token blocks of which N / n cross the NIC, as a ring's
    hops do); inside one node one per copy
    (Eq. 3), the g members' tokens (``all_gather``), or one per destination rank (DeepEP and HybridEP:
    ``rank_copies``). ``routing``: "consecutive" routing sends a token to the few ranks and nodes its adjacent
    experts span where a dispatcher sends one copy per rank or node.
    """
    g = min(degree, ranks_per_node)
    nodes = max(degree // ranks_per_node, 1)
    experts_local = num_experts // degree
    routed = tokens_local * top_k
    scale = stats.comm_scale if stats is not None else 1.0
    routed_bytes = routed * hidden_size * BYTES_BF16 * scale
    rows = math.ceil(routed * etp / experts_local * capacity_factor)
    if dropless and stats is not None:  # dropless: the busiest GPU's copies, no padding
        rows = math.ceil(stats.busiest_copies * etp / experts_local)
    wire = DISPATCHERS[dispatcher].cross_node_wire()
    if degree > g and wire == Wire.ALL_GATHER:  # across nodes, NCCL's ring all-gather of every member's tokens
        egress = (degree - 1) * tokens_local * hidden_size * BYTES_BF16
        nic = egress * nodes / degree  # the ring crosses the node boundary at N of its n hops
        nvlink, all_gather = egress - nic, True
    elif degree > g and wire == Wire.PER_COPY:  # across nodes, NCCL: NIC once per remote copy
        cross = nccl_all_to_all_bytes(tokens_local, hidden_size, top_k, degree, ranks_per_node)
        nvlink, nic, all_gather = cross.nvlink_bytes * scale, cross.nic_bytes * scale, False
    elif degree > g:  # across nodes: DeepEP all-to-all, NIC once per remote node + NVLink fan-out
        cross = ep_dispatch_bytes(
            tokens_local, hidden_size, top_k, num_experts, degree, ranks_per_node, max_nodes, routing=routing
        )
        nvlink, nic, all_gather = cross.nvlink_bytes * scale, cross.nic_bytes * scale, False
    elif all_gather:
        nvlink, nic = group_tokens * hidden_size * BYTES_BF16 * (g - 1) / g, 0.0
    elif DISPATCHERS[dispatcher].in_node_wire(top_k, all_gather_above_top_k=top_k) == Wire.PER_RANK:
        copies = rank_copies_bytes(tokens_local, hidden_size, top_k, num_experts, g, max_nodes, routing)
        nvlink, nic = copies * scale, 0.0
    else:
        nvlink, nic = routed_bytes * (g - 1) / g, 0.0
    dropped = stats.dropped_fraction if stats is not None else 0.0
    return EpPlan(degree, dispatcher, g, nodes, all_gather, nvlink, nic, experts_local, rows, routed_bytes, dropped)
