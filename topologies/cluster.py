"""The cluster: scale-up domains of GPUs on NVSwitch and a rail-optimized leaf/spine fabric."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from topologies.errors import ConfigError, check_positive, check_positive_int, lookup_preset
from topologies.hardware import GPU_PRESETS, GpuSpec

Node = tuple[Any, ...]  # ("gpu", g) | ("nvswitch", node) | ("leaf", pod, rail) | ("spine", rail)
Edge = tuple[Node, Node]

# Leaf-to-spine hop latency: assumed ~1 us (switch port-to-port plus cable), no public source.
FABRIC_LATENCY_S = 1e-6


@dataclass(frozen=True)
class ClusterSpec:
    """A GPU cluster: a GPU model, scale-up domain size, NICs and the leaf/spine fabric."""

    gpu: GpuSpec
    num_gpus: int
    gpus_per_node: int = 8  # scale-up (NVLink) domain: 8 for HGX/DGX, 72 for an NVL72
    nic_bandwidth_Bps: float = 50e9  # one 400 Gb/s CX7 per GPU, paper App. A.1
    nic_efficiency: float = 0.94  # NCCL reaches 46-49 GB/s of 50, NVIDIA/nccl-tests #290, #267
    nic_latency_s: float = 5e-6  # assumed, RDMA one-hop order of magnitude
    nodes_per_leaf: int = 32  # nodes per rail-optimized pod (one leaf per rail per pod), assumed
    leaf_oversubscription: float = 1.0  # leaf downlink:uplink ratio; 1 = non-blocking spine

    def __post_init__(self) -> None:
        """Validate every field; raise ConfigError naming the field and the rule."""
        if not isinstance(self.gpu, GpuSpec):
            raise ConfigError("gpu", f"must be a GpuSpec, got {type(self.gpu).__name__}")
        check_positive_int("gpus", self.num_gpus)
        check_positive_int("gpus_per_node", self.gpus_per_node)
        check_positive("nic_bandwidth_Bps", self.nic_bandwidth_Bps)
        check_positive("nic_efficiency", self.nic_efficiency)
        if self.nic_efficiency > 1.0:
            raise ConfigError("nic_efficiency", f"must be in (0, 1], got {self.nic_efficiency!r}")
        check_positive("nic_latency_s", self.nic_latency_s)
        check_positive_int("nodes_per_leaf", self.nodes_per_leaf)
        check_positive("leaf_oversubscription", self.leaf_oversubscription)
        if self.leaf_oversubscription < 1.0:
            raise ConfigError(
                "leaf_oversubscription", f"must be >= 1 (1 = non-blocking), got {self.leaf_oversubscription!r}"
            )
        if self.num_gpus % self.gpus_per_node != 0:
            raise ConfigError(
                "gpus",
                f"{self.num_gpus} must be a multiple of gpus_per_node={self.gpus_per_node}",
            )

    @property
    def num_nodes(self) -> int:
        """Number of scale-up domains (servers)."""
        return self.num_gpus // self.gpus_per_node

    @property
    def num_pods(self) -> int:
        """Number of leaf pods (ceil of nodes / nodes_per_leaf); the last may be partial."""
        return -(-self.num_nodes // self.nodes_per_leaf)

    @property
    def nic_effective_Bps(self) -> float:
        """Bandwidth per direction a NIC delivers to NCCL-class transfers, bytes/s."""
        return self.nic_bandwidth_Bps * self.nic_efficiency

    def nodes_in_pod(self, pod: int) -> int:
        """Number of nodes under the leaves of pod (nodes_per_leaf except a partial last pod)."""
        return min(self.nodes_per_leaf, self.num_nodes - pod * self.nodes_per_leaf)

    def with_(self, **changes: Any) -> ClusterSpec:
        """Return a copy with the given fields replaced (dataclasses.replace)."""
        return dataclasses.replace(self, **changes)


def _preset(gpu: str) -> Callable[..., ClusterSpec]:
    """Return a ClusterSpec constructor with the GPU preset bound."""
    return functools.partial(ClusterSpec, gpu=GPU_PRESETS[gpu])


# Every preset assumes the paper's network (App. A.1): 8 GPUs per node on NVSwitch, one 400 Gb/s NIC
# (50 GB/s) per GPU, rail-optimized. The paper does not describe its fabric; it stays a parameter.
# NOTE: a DGX A100 actually ships 200 Gb/s HDR NICs (25 GB/s); pass nic_bandwidth_Bps=25e9 for that.
CLUSTER_PRESETS: dict[str, Callable[..., ClusterSpec]] = {
    "h800": functools.partial(
        ClusterSpec, gpu=GPU_PRESETS["h800"], gpus_per_node=8, nic_bandwidth_Bps=50e9
    ),  # the paper's cluster (Table 4, App. A.1)
    "h100": _preset("h100"),
    "a100": _preset("a100"),
    "h20": _preset("h20"),
    # GB200 NVL72: one NVLink 5 domain of 72 GPUs (18 NVSwitch trays, one crossbar here); scale-out one
    # 400 Gb/s ConnectX-7 per GPU (NVIDIA GB200 NVL72 reference architecture), rail-optimized as above.
    "gb200-nvl72": functools.partial(ClusterSpec, gpu=GPU_PRESETS["gb200"], gpus_per_node=72, nic_bandwidth_Bps=50e9),
}


def cluster_preset(name: str, num_gpus: int, **overrides: Any) -> ClusterSpec:
    """Return the named cluster preset with num_gpus GPUs and any field overrides."""
    make = lookup_preset("cluster", CLUSTER_PRESETS, name)
    known = {f.name for f in dataclasses.fields(ClusterSpec)}
    for field_name in overrides:
        if field_name not in known or field_name == "num_gpus":
            raise ConfigError(
                field_name, f"not an overridable ClusterSpec field; choose from {sorted(known - {'num_gpus'})}"
            )
    return make(num_gpus=num_gpus, **overrides)


def _add_link(graph: nx.DiGraph, a: Node, b: Node, bandwidth_Bps: float, latency_s: float, kind: str) -> None:
    """Add one edge per direction between a and b with the same attributes."""
    graph.add_edge(a, b, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s, kind=kind)
    graph.add_edge(b, a, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s, kind=kind)


def build_cluster(spec: ClusterSpec) -> nx.DiGraph:
    """Build the cluster graph: GPUs, NVSwitches, and for multi-node clusters leaves and spines."""
    graph = nx.DiGraph(spec=spec)
    gpu = spec.gpu
    multi_node = spec.num_nodes > 1
    for g in range(spec.num_gpus):
        node, rail = divmod(g, spec.gpus_per_node)
        graph.add_node(("gpu", g), node=node, rail=rail)
        # NVSwitch is modeled as one crossbar per node; the GPU's NVLink port is the bottleneck.
        _add_link(graph, ("gpu", g), ("nvswitch", node), gpu.nvlink_bandwidth_Bps, gpu.nvlink_latency_s, "nvlink")
        if multi_node:
            # Rail-optimized: local rank r of every node in a pod plugs into leaf (pod, r).
            leaf = ("leaf", node // spec.nodes_per_leaf, rail)
            _add_link(graph, ("gpu", g), leaf, spec.nic_effective_Bps, spec.nic_latency_s, "nic")
    if multi_node:
        for pod in range(spec.num_pods):
            # Leaf uplink capacity = its downlinks (one NIC per node in the pod) / oversubscription.
            uplink_Bps = spec.nodes_in_pod(pod) * spec.nic_effective_Bps / spec.leaf_oversubscription
            for rail in range(spec.gpus_per_node):
                _add_link(graph, ("leaf", pod, rail), ("spine", rail), uplink_Bps, FABRIC_LATENCY_S, "fabric")
    return graph


def rail_path(spec: ClusterSpec, src: int, dst: int) -> list[Edge]:
    """Edges from src to dst on different nodes of the same rail: leaf, or leaf-spine-leaf."""
    rail = src % spec.gpus_per_node
    src_pod = (src // spec.gpus_per_node) // spec.nodes_per_leaf
    dst_pod = (dst // spec.gpus_per_node) // spec.nodes_per_leaf
    src_leaf: Node = ("leaf", src_pod, rail)
    dst_leaf: Node = ("leaf", dst_pod, rail)
    if src_pod == dst_pod:
        return [(("gpu", src), src_leaf), (src_leaf, ("gpu", dst))]
    spine: Node = ("spine", rail)
    return [(("gpu", src), src_leaf), (src_leaf, spine), (spine, dst_leaf), (dst_leaf, ("gpu", dst))]


def gpu_path(spec: ClusterSpec, src: int, dst: int) -> list[Edge]:
    """Ordered directed edges a transfer from GPU src to GPU dst crosses; O(1), no graph search."""
    for field_name, g in (("src", src), ("dst", dst)):
        if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < spec.num_gpus:
            raise ConfigError(field_name, f"GPU index must be an int in [0, {spec.num_gpus}), got {g!r}")
    if src == dst:
        return []
    src_node, src_rail = divmod(src, spec.gpus_per_node)
    dst_node, dst_rail = divmod(dst, spec.gpus_per_node)
    switch: Node = ("nvswitch", src_node)
    if src_node == dst_node:
        return [(("gpu", src), switch), (switch, ("gpu", dst))]
    if src_rail == dst_rail:
        return rail_path(spec, src, dst)
    # NCCL PXN: move the data over NVLink to the source-node GPU on dst's rail, then send on that rail.
    proxy = src_node * spec.gpus_per_node + dst_rail
    return [(("gpu", src), switch), (switch, ("gpu", proxy))] + rail_path(spec, proxy, dst)


def path_edges_bottleneck_Bps(graph: nx.DiGraph, edges: Sequence[Edge]) -> float:
    """Smallest bandwidth_Bps along edges (inf for an empty path)."""
    return min((graph.edges[a, b]["bandwidth_Bps"] for a, b in edges), default=float("inf"))
