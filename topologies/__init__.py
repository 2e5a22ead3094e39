"""The cluster: GPU hardware presets, the networkx fabric graph and routing between GPUs."""

from topologies.cluster import (
    CLUSTER_PRESETS,
    ClusterSpec,
    build_cluster,
    cluster_preset,
    gpu_path,
    path_edges_bottleneck_Bps,
)
from topologies.errors import ConfigError
from topologies.hardware import GPU_PRESETS, GpuSpec, gpu_preset

__all__ = [
    "CLUSTER_PRESETS",
    "GPU_PRESETS",
    "ClusterSpec",
    "ConfigError",
    "GpuSpec",
    "build_cluster",
    "cluster_preset",
    "gpu_path",
    "gpu_preset",
    "path_edges_bottleneck_Bps",
]
