"""The cluster: scale-up domains of GPUs on NVSwitch and a rail-optimized leaf/spine fabric."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from topologies.bounds import check_physical
from topologies.errors import ConfigError, check_positive_int, lookup_preset
from topologies.hardware import GPU_PRESETS, GpuSpec

if TYPE_CHECKING:
    import networkx as nx

Node = tuple[Any, ...]  # ("gpu", g) | ("nvswitch", node) | ("leaf", pod, rail) | ("spine", rail)
Edge = tuple[Node, Node]

# Leaf-to-spine hop latency: assumed ~1 us (switch port-to-port plus cable), no public source. A graph edge
# attribute only: no transfer reads it (simulator/engine/unfolded.py).
FABRIC_LATENCY_S = 1e-6

# NCCL's own latency model (NVIDIA/nccl src/graph/tuning.cc at b6475625, the Ring algorithm's Simple protocol,
# the one NCCL picks for messages of megabytes): a fixed 8.4 us per collective (baseLat) and 14 us per step
# over the network (hwLat[NET]); 3.4 us per NVLink step is topologies.hardware's nvlink_latency_s.
NCCL_BASE_LATENCY_S = 8.4e-6
NCCL_NET_STEP_LATENCY_S = 14e-6


@dataclass(frozen=True)
class ClusterSpec:
    """A GPU cluster: a GPU model, scale-up domains and how a job is packed into them, NICs, the fabric.

    The hardware has domains of ``domain_gpus`` GPUs on one NVLink fabric, made of hosts (servers or
    trays) of ``gpus_per_host``; a job uses ``domain_gpus_used`` GPUs of each domain it spans. What the
    simulator sees is ``gpus_per_node``: the GPUs of one domain as this job sees it (a job smaller than
    one domain gets one domain of its size), used everywhere as the NVLink group size. Hosts matter to
    packing only (a job takes whole hosts): every GPU has its own NIC, on the rail of its rank in the domain.
    """

    gpu: GpuSpec
    num_gpus: int
    domain_gpus: int = 8  # GPUs of one scale-up (NVLink) domain: 8 for HGX/DGX, 72 for an NVL72
    gpus_per_host: int = 0  # GPUs of one host (server, compute tray); 0 = the domain is one host (HGX/DGX)
    domain_gpus_used: int = 0  # GPUs of each domain a job spans (whole hosts); 0 = every GPU of it
    nic_bandwidth_Bps: float = 50e9  # one 400 Gb/s CX7 per GPU, paper App. A.1
    nic_efficiency: float = 0.94  # NCCL reaches 46-49 GB/s of 50, NVIDIA/nccl-tests #290, #267
    # One NCCL send over the NIC (a PP send): NCCL's fixed cost and one network step, 8.4 + 14 us (above).
    # Until stop 36: 5 us, assumed.
    nic_latency_s: float = NCCL_BASE_LATENCY_S + NCCL_NET_STEP_LATENCY_S
    nodes_per_leaf: int = 32  # nodes per rail-optimized pod (one leaf per rail per pod), assumed
    leaf_oversubscription: float = 1.0  # leaf downlink:uplink ratio; 1 = non-blocking spine

    def __post_init__(self) -> None:
        """Validate every field; raise ConfigError naming the field and the rule."""
        if not isinstance(self.gpu, GpuSpec):
            raise ConfigError("gpu", f"must be a GpuSpec, got {type(self.gpu).__name__}")
        for name, count in (
            ("gpus", self.num_gpus),
            ("domain_gpus", self.domain_gpus),
            ("nodes_per_leaf", self.nodes_per_leaf),
        ):
            check_positive_int(name, count)
            check_physical(name, name, count)
        for name in ("nic_bandwidth_Bps", "nic_efficiency", "nic_latency_s", "leaf_oversubscription"):
            check_physical(name, name, getattr(self, name))  # within physical bounds (topologies/bounds.py)
        self._check_packing()

    def _check_packing(self) -> None:
        """Hosts tile the domain, a job takes whole hosts of each domain, and whole domains when it spans several."""
        for name in ("gpus_per_host", "domain_gpus_used"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(name, f"must be an integer >= 0 (0 = the whole domain), got {value!r}")
        host, used = self.host_gpus, self.used_domain_gpus
        if self.domain_gpus % host:
            raise ConfigError("gpus_per_host", f"{host} must divide domain_gpus={self.domain_gpus}")
        if used > self.domain_gpus or used % host:
            raise ConfigError(
                "domain_gpus_used", f"{used} must be whole hosts of {host} GPUs, at most domain_gpus={self.domain_gpus}"
            )
        if self.num_gpus > used and self.num_gpus % used:
            lower, higher = self.num_gpus // used * used, (self.num_gpus // used + 1) * used
            fewer = (
                f" (or the {_PARTIAL_RACKS} presets, whose jobs take 64 GPUs of each 72-GPU rack)"
                if used == 72 and self.domain_gpus == 72 and self.num_gpus % 64 == 0
                else ""
            )
            raise ConfigError(
                "gpus",
                f"{self.num_gpus} must be a multiple of the {used} GPUs a job uses per domain; try {lower} or "
                f"{higher}{fewer}",
            )
        if self.num_gpus > host and self.num_gpus % host:
            raise ConfigError("gpus", f"{self.num_gpus} must be whole hosts of {host} GPUs")

    @property
    def host_gpus(self) -> int:
        """GPUs of one host (gpus_per_host, or the whole domain when 0)."""
        return self.gpus_per_host or self.domain_gpus

    @property
    def used_domain_gpus(self) -> int:
        """GPUs a job uses of each domain it spans (domain_gpus_used, or the whole domain when 0)."""
        return self.domain_gpus_used or self.domain_gpus

    @property
    def gpus_per_node(self) -> int:
        """GPUs of one scale-up domain as this job sees it: the simulator's NVLink group size."""
        return min(self.num_gpus, self.used_domain_gpus)

    @property
    def num_nodes(self) -> int:
        """Number of scale-up domains the job spans."""
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


# Presets as data: the ClusterSpec fields of each (num_gpus comes from the job). Unless said otherwise a
# preset has the paper's network (App. A.1): 8 GPUs per node on NVSwitch, one 400 Gb/s NIC (50 GB/s) per
# GPU, rail-optimized. The paper does not describe its fabric; it stays a parameter.
_NVL72 = {"gpu": GPU_PRESETS["gb200"], "domain_gpus": 72, "gpus_per_host": 4}
_PARTIAL_RACKS = "gb200 / gb300"  # the NVL72 presets whose jobs take 64 GPUs of each rack (CLUSTER_PRESETS)
CLUSTER_PRESETS: dict[str, dict[str, Any]] = {
    "h800": {"gpu": GPU_PRESETS["h800"]},  # the paper's cluster (Table 4, App. A.1)
    "h100": {"gpu": GPU_PRESETS["h100"]},
    # DGX A100: eight single-port 200 Gb/s HDR ConnectX-6 for the compute fabric, one per GPU (NVIDIA DGX A100
    # datasheet; Selene, where Megatron-LM's SC21 runs were measured, is built of them)
    "a100": {"gpu": GPU_PRESETS["a100"], "nic_bandwidth_Bps": 25e9},
    "h20": {"gpu": GPU_PRESETS["h20"]},
    # DGX H200 and DGX B200: 8 GPUs on NVSwitch, eight single-port 400 Gb/s ConnectX-7 for the compute
    # fabric, one per GPU (NVIDIA DGX BasePOD reference architecture, core components).
    "h200": {"gpu": GPU_PRESETS["h200"]},
    "b200": {"gpu": GPU_PRESETS["b200"]},
    # DGX GB200 (NVL72): 18 compute trays of 4 GPUs on one NVLink 5 domain of 72 (DGX GB200 user guide,
    # hardware; 9 NVSwitch trays, one crossbar here); one 400 Gb/s NDR ConnectX-7 per GPU across racks
    # (DGX SuperPOD GB200 reference architecture; NVIDIA's Slurm block-scheduling post: "typically
    # 50 GB/s (400 Gb/s)"). Large jobs take 16 of the 18 trays of each rack, 64 GPUs, leaving spares
    # (the same post: segment size 16 for large jobs; Megatron-Bridge GB200 recipes run 64 and 256 GPUs).
    "gb200": {**_NVL72, "domain_gpus_used": 64},
    "gb200-nvl72": dict(_NVL72),  # the same rack with all 72 GPUs in the job
    # DGX B300 and GB300 NVL72: as the B200 and GB200 systems, with one 800 Gb/s ConnectX-8 SuperNIC per GPU for
    # the compute fabric (NVIDIA GB300 NVL72 and DGX B300 product pages: "NVIDIA ConnectX-8 SuperNIC", 800 Gb/s).
    "b300": {"gpu": GPU_PRESETS["b300"], "nic_bandwidth_Bps": 100e9},
    "gb300": {**_NVL72, "gpu": GPU_PRESETS["gb300"], "nic_bandwidth_Bps": 100e9, "domain_gpus_used": 64},
}


def cluster_fields(name: str) -> dict[str, Any]:
    """The ClusterSpec fields of the named preset (a copy), or a ConfigError that lists the choices."""
    return dict(lookup_preset("cluster", CLUSTER_PRESETS, name))


def cluster_preset(name: str, num_gpus: int, **overrides: Any) -> ClusterSpec:
    """Return the named cluster preset with num_gpus GPUs and any field overrides."""
    preset = cluster_fields(name)
    known = {f.name for f in dataclasses.fields(ClusterSpec)}
    for field_name in overrides:
        if field_name not in known or field_name == "num_gpus":
            raise ConfigError(
                field_name, f"not an overridable ClusterSpec field; choose from {sorted(known - {'num_gpus'})}"
            )
    return ClusterSpec(num_gpus=num_gpus, **{**preset, **overrides})


def _add_link(graph: nx.DiGraph, a: Node, b: Node, bandwidth_Bps: float, latency_s: float, kind: str) -> None:
    """Add one edge per direction between a and b with the same attributes."""
    graph.add_edge(a, b, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s, kind=kind)
    graph.add_edge(b, a, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s, kind=kind)


def build_cluster(spec: ClusterSpec) -> nx.DiGraph:
    """Build the cluster graph: GPUs, NVSwitches, and for multi-node clusters leaves and spines."""
    import networkx as nx  # NOTE: imported here, not at start-up: only the graph needs it

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
