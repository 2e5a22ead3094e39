"""Cross-node expert parallelism with node-limited routing (DeepSeek-V3 Sec. 3.2.2, DeepEP): byte counts.

A token picks k of E experts; the EP group spans N nodes of G GPUs each (E/N experts per node, E/(NG)
per GPU). Node-limited routing first selects at most M nodes, then the top-k experts on them. A token
crosses the NIC once per destination node other than its own (to the GPU of its own rail there) and
is then forwarded over NVLink to the GPUs holding its experts in that node (DeepEP internode dispatch).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

from workloads.ops import BYTES_BF16


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
) -> EpBytes:
    """Per-GPU NIC and NVLink egress of one EP dispatch with node-limited routing (uniform routing).

    N = ep / G nodes with G = min(ep, gpus_per_node). The selected nodes are uniform, so a token's own
    node is among its D nodes with probability 1/N of the total: remote nodes = D (N - 1) / N, and
    NIC egress = tokens x h x bytes x D (N - 1) / N (one copy per remote node; by symmetry each GPU
    receives as much as it sends). On NVLink each of the k copies moves unless its expert sits on the
    GPU it arrived at (the sender for its own node, the same-rail GPU for a remote node), probability
    1/G, so NVLink egress = tokens x h x bytes x k (G - 1) / G, counting the arrivals each GPU forwards
    for its peers. With N = 1 this is the paper's Eq. 3; copies are not deduplicated per GPU.
    """
    g = min(ep, gpus_per_node)
    nodes = ep // g
    token_bytes = tokens_local * hidden_size * bytes_per_element
    d = expected_nodes(num_experts, top_k, nodes, max_nodes)
    remote = d * (nodes - 1) / nodes
    return EpBytes(token_bytes * remote, token_bytes * top_k * (g - 1) / g, d, remote)
