"""Tests for topologies: presets, validation, graph shape and routing, with hand-computed numbers."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies import (
    CLUSTER_PRESETS,
    GPU_PRESETS,
    ClusterSpec,
    ConfigError,
    GpuSpec,
    build_cluster,
    cluster_preset,
    gpu_path,
    gpu_preset,
    path_edges_bottleneck_Bps,
)


def test_config_error_message() -> None:
    """ConfigError keeps field and rule and prints 'field: rule'."""
    err = ConfigError("gpus", "must be > 0")
    assert isinstance(err, ValueError)
    assert (err.field, err.rule, str(err)) == ("gpus", "must be > 0", "gpus: must be > 0")


def test_gpu_presets_values() -> None:
    """Preset numbers match the paper's hardware (MegaScale-MoE Table 4 and App. A.1)."""
    h800 = gpu_preset("h800")
    assert (h800.peak_bf16_flops, h800.peak_fp8_flops, h800.hbm_bytes) == (989e12, 1979e12, 80e9)
    assert (h800.hbm_bandwidth_Bps, h800.sm_count, h800.nvlink_bandwidth_Bps) == (3.35e12, 132, 160e9)
    assert h800.nvlink_latency_s == 3.4e-6
    assert gpu_preset("h100").nvlink_bandwidth_Bps == 360e9
    a100 = gpu_preset("a100")
    assert (a100.peak_bf16_flops, a100.peak_fp8_flops, a100.sm_count) == (312e12, 312e12, 108)
    assert a100.nvlink_bandwidth_Bps == pytest.approx(0.8 * 600e9 / 2)
    h20 = gpu_preset("h20")
    assert (h20.peak_bf16_flops, h20.peak_fp8_flops, h20.hbm_bytes, h20.sm_count) == (148e12, 296e12, 96e9, 78)
    assert h20.nvlink_bandwidth_Bps == pytest.approx(0.8 * 900e9 / 2)
    assert set(GPU_PRESETS) >= {"h800", "h100", "a100", "h20", "h200", "b200", "gb200"}  # see test_hardware_ext
    assert all(isinstance(spec, GpuSpec) and spec.source for spec in GPU_PRESETS.values())


def test_unknown_presets_name_the_field() -> None:
    """Unknown GPU or cluster preset names raise ConfigError on 'gpu' / 'cluster'."""
    with pytest.raises(ConfigError) as gpu_err:
        gpu_preset("mi300x")
    assert gpu_err.value.field == "gpu" and "'mi300x'" in str(gpu_err.value) and "h800" in str(gpu_err.value)
    with pytest.raises(ConfigError) as cluster_err:
        cluster_preset("tpu", 8)
    assert cluster_err.value.field == "cluster"


@pytest.mark.parametrize("field", ["peak_bf16_flops", "hbm_bytes", "sm_count", "nvlink_latency_s"])
def test_gpu_spec_validation_names_field(field: str) -> None:
    """A non-positive GpuSpec number raises ConfigError naming that field."""
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(GPU_PRESETS["h800"], **{field: 0})
    assert err.value.field == field


def test_cluster_spec_validation() -> None:
    """Bad ClusterSpec values raise ConfigError naming the field and the rule."""
    gpu = GPU_PRESETS["h800"]
    with pytest.raises(ConfigError) as err:
        ClusterSpec(gpu, 12)
    assert str(err.value) == "gpus: 12 must be a multiple of the 8 GPUs a job uses per domain; try 8 or 16"
    for field, value in [
        ("nic_bandwidth_Bps", -1.0),
        ("nic_efficiency", 1.5),
        ("nodes_per_leaf", 0),
        ("leaf_oversubscription", 0.5),
        ("domain_gpus", 0),
        ("gpus_per_host", -4),
        ("gpus_per_host", 3),  # does not divide the 8-GPU domain
        ("domain_gpus_used", 12),  # more than the domain
        ("nic_latency_s", float("nan")),
    ]:
        with pytest.raises(ConfigError) as err:
            ClusterSpec(gpu, 16, **{field: value})
        assert err.value.field == field
    with pytest.raises(ConfigError) as err:
        ClusterSpec(gpu, 0)
    assert err.value.field == "gpus"
    with pytest.raises(ConfigError) as err:
        cluster_preset("h800", 16, nic_speed=1.0)
    assert err.value.field == "nic_speed"


def test_cluster_preset_and_properties() -> None:
    """The paper's H800 cluster: 8 per node, 50 GB/s NIC at 94% efficiency."""
    spec = cluster_preset("h800", 240)
    assert spec.gpu is GPU_PRESETS["h800"]
    assert (spec.num_nodes, spec.gpus_per_node, spec.nic_bandwidth_Bps) == (30, 8, 50e9)
    assert spec.nic_effective_Bps == pytest.approx(47e9)
    assert spec.with_(domain_gpus=72, num_gpus=144).num_nodes == 2
    assert cluster_preset("h20", 16, nodes_per_leaf=4).nodes_per_leaf == 4
    assert set(CLUSTER_PRESETS) >= {"h800", "h100", "a100", "h20", "h200", "b200", "gb200", "gb200-nvl72"}


def test_graph_counts_two_nodes() -> None:
    """2 nodes x 8: 16 GPUs + 2 NVSwitches + 8 leaves (1 pod) + 8 spines; 2 x (16 + 16 + 8) edges."""
    graph = build_cluster(cluster_preset("h800", 16))
    assert graph.number_of_nodes() == 16 + 2 + 8 + 8
    assert graph.number_of_edges() == 2 * (16 + 16 + 8)  # nvlink, nic, leaf-spine; both directions
    assert graph.graph["spec"].num_gpus == 16
    assert graph.nodes[("gpu", 11)] == {"node": 1, "rail": 3}
    kinds = [k for _, _, k in graph.edges(data="kind")]
    assert (kinds.count("nvlink"), kinds.count("nic"), kinds.count("fabric")) == (32, 32, 16)


def test_graph_counts_64_nodes_two_pods() -> None:
    """64 nodes, 32 per leaf: 512 GPUs + 64 NVSwitches + 2x8 leaves + 8 spines; 2 x (512 + 512 + 16) edges."""
    spec = cluster_preset("h800", 512, nodes_per_leaf=32)
    graph = build_cluster(spec)
    assert graph.number_of_nodes() == 512 + 64 + 16 + 8
    assert graph.number_of_edges() == 2 * (512 + 512 + 16)
    uplink = graph.edges[("leaf", 1, 5), ("spine", 5)]
    assert uplink["bandwidth_Bps"] == pytest.approx(32 * 47e9)
    assert (uplink["kind"], uplink["latency_s"]) == ("fabric", 1e-6)
    oversub = build_cluster(spec.with_(leaf_oversubscription=2.0))
    assert oversub.edges[("spine", 0), ("leaf", 0, 0)]["bandwidth_Bps"] == pytest.approx(16 * 47e9)


def test_single_node_has_no_fabric_and_partial_pod() -> None:
    """One node: only GPUs and one NVSwitch. A partial last pod's uplink counts its own nodes."""
    graph = build_cluster(cluster_preset("h100", 8))
    assert graph.number_of_nodes() == 9 and graph.number_of_edges() == 16
    partial = build_cluster(cluster_preset("h100", 80, nodes_per_leaf=4))  # 10 nodes: pods of 4, 4, 2
    assert partial.edges[("leaf", 2, 0), ("spine", 0)]["bandwidth_Bps"] == pytest.approx(2 * 47e9)


def _check_path(spec: ClusterSpec, graph: object, src: int, dst: int) -> list:
    """Assert a path exists in graph, is contiguous and runs src -> dst; return it."""
    path = gpu_path(spec, src, dst)
    if src == dst:
        assert path == []
        return path
    assert all(graph.has_edge(a, b) for a, b in path)  # type: ignore[attr-defined]
    assert all(path[i][1] == path[i + 1][0] for i in range(len(path) - 1))
    assert path[0][0] == ("gpu", src) and path[-1][1] == ("gpu", dst)
    return path


def test_all_paths_exist_in_graph() -> None:
    """Every GPU pair of a 3-pod cluster routes over existing, contiguous edges."""
    spec = cluster_preset("h800", 48, nodes_per_leaf=2)  # 6 nodes, 3 pods
    graph = build_cluster(spec)
    for src in range(48):
        for dst in range(48):
            _check_path(spec, graph, src, dst)


def test_same_node_path_is_two_nvlink_hops() -> None:
    """GPU 1 -> GPU 6 on node 0 goes via the NVSwitch only."""
    spec = cluster_preset("h800", 16)
    graph = build_cluster(spec)
    path = _check_path(spec, graph, 1, 6)
    assert path == [(("gpu", 1), ("nvswitch", 0)), (("nvswitch", 0), ("gpu", 6))]
    assert [graph.edges[e]["kind"] for e in path] == ["nvlink", "nvlink"]
    assert path_edges_bottleneck_Bps(graph, path) == 160e9


def test_cross_rail_path_uses_pxn() -> None:
    """GPU 1 (node 0, rail 1) -> GPU 14 (node 1, rail 6): NVLink to GPU 6, then rail 6."""
    spec = cluster_preset("h800", 16)
    graph = build_cluster(spec)
    path = _check_path(spec, graph, 1, 14)
    assert path == [
        (("gpu", 1), ("nvswitch", 0)),
        (("nvswitch", 0), ("gpu", 6)),
        (("gpu", 6), ("leaf", 0, 6)),
        (("leaf", 0, 6), ("gpu", 14)),
    ]
    assert [graph.edges[e]["kind"] for e in path] == ["nvlink", "nvlink", "nic", "nic"]


def test_cross_pod_path_goes_through_spine() -> None:
    """GPU 3 (pod 0) -> GPU 8*40+3 (node 40, pod 1), same rail: leaf, spine, leaf."""
    spec = cluster_preset("h800", 512)
    graph = build_cluster(spec)
    path = _check_path(spec, graph, 3, 323)
    assert path == [
        (("gpu", 3), ("leaf", 0, 3)),
        (("leaf", 0, 3), ("spine", 3)),
        (("spine", 3), ("leaf", 1, 3)),
        (("leaf", 1, 3), ("gpu", 323)),
    ]
    assert path_edges_bottleneck_Bps(graph, path) == pytest.approx(spec.nic_effective_Bps)


def test_cross_node_bottleneck_is_nic() -> None:
    """Any cross-node path's bottleneck is the effective NIC bandwidth, 0.94 x 50 GB/s."""
    spec = cluster_preset("h800", 64)
    graph = build_cluster(spec)
    for src, dst in [(0, 8), (2, 61), (7, 40)]:
        assert path_edges_bottleneck_Bps(graph, gpu_path(spec, src, dst)) == pytest.approx(47e9)
    assert path_edges_bottleneck_Bps(graph, []) == float("inf")


def test_gpu_path_rejects_bad_index() -> None:
    """Out-of-range GPU indices raise ConfigError naming src or dst."""
    spec = cluster_preset("h800", 16)
    with pytest.raises(ConfigError) as err:
        gpu_path(spec, 0, 16)
    assert err.value.field == "dst"


@settings(max_examples=200, deadline=None)
@given(
    num_nodes=st.integers(1, 12),
    gpus_per_node=st.sampled_from([1, 2, 4, 8]),
    nodes_per_leaf=st.integers(1, 5),
    data=st.data(),
)
def test_paths_are_contiguous_property(
    num_nodes: int, gpus_per_node: int, nodes_per_leaf: int, data: st.DataObject
) -> None:
    """For random clusters and GPU pairs, paths exist, are contiguous, and run src -> dst."""
    spec = ClusterSpec(
        GPU_PRESETS["h800"], num_nodes * gpus_per_node, domain_gpus=gpus_per_node, nodes_per_leaf=nodes_per_leaf
    )
    graph = build_cluster(spec)
    src = data.draw(st.integers(0, spec.num_gpus - 1))
    dst = data.draw(st.integers(0, spec.num_gpus - 1))
    path = _check_path(spec, graph, src, dst)
    if src != dst and src // gpus_per_node != dst // gpus_per_node:
        assert path_edges_bottleneck_Bps(graph, path) <= spec.nic_effective_Bps
