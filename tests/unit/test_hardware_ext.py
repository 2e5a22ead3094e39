"""Beyond the paper, hardware: the GB200 GPU preset and the gb200-nvl72 cluster (72-GPU NVLink domain), the Blackwell
Ultra presets (b300, gb300)."""

from __future__ import annotations

from simulator.costs.collective_efficiency import nvls_all_reduce_efficiency
from simulator.report.simulate import simulate
from topologies.cluster import cluster_preset
from topologies.hardware import GpuGeneration, gpu_preset
from workloads.specs.layouts import layout_preset


def test_gb200_preset_numbers() -> None:
    """Datasheet: rack 360 PF BF16 sparse / 72 GPUs / 2 = 2.5 PF dense; 13.4 TB, 576 TB/s / 72."""
    gpu = gpu_preset("gb200")
    assert gpu.peak_bf16_flops == 360e15 / 72 / 2 == 2.5e15
    assert gpu.peak_fp8_flops == 2 * gpu.peak_bf16_flops
    assert (gpu.hbm_bytes, gpu.hbm_bandwidth_Bps) == (186e9, 8e12)
    # NCCL's NVLink 5 bus bandwidth without SHARP, 680 GB/s of the 900 per direction (topologies.hardware)
    assert gpu.nvlink_bandwidth_Bps == 680e9 < 1.8e12 / 2


def test_gb200_nvl72_cluster() -> None:
    cluster = cluster_preset("gb200-nvl72", 144)
    assert (cluster.gpus_per_node, cluster.num_nodes, cluster.gpu.name) == (72, 2, "gb200")


def test_gb200_runs_faster_than_h800() -> None:
    layout = layout_preset("megascale-moe").with_(pp=6)
    fast = simulate("paper-352b", layout, 144, cluster="gb200-nvl72", global_batch=36)
    slow = simulate("paper-352b", layout, 144, cluster="h800", global_batch=36, allow_oom=True)  # 82 GiB > 80 GB
    assert fast.step_time_s < slow.step_time_s / 1.5


def test_blackwell_ultra_presets() -> None:
    """DGX B300 and GB300 NVL72: the B200's / GB200's BF16 and FP8 peaks (ml-engineering's table), 288 GB, 160 and 152 SMs,
    Blackwell Ultra's tables (Blackwell's GEMMs, cuDNN's GB300 attention), an 800 Gb/s ConnectX-8 per GPU, and the NVL72 rack of the gb200 preset."""
    b300, gb300 = gpu_preset("b300"), gpu_preset("gb300")
    assert (b300.peak_bf16_flops, gb300.peak_bf16_flops, b300.hbm_bytes, b300.sm_count, gb300.sm_count) == (
        2.25e15,
        2.5e15,
        288e9,
        160,
        152,
    )
    assert gpu_preset("gb200").sm_count == 152  # the devices' count (topologies/hardware.py), a B200's 148
    assert b300.generation == gb300.generation == GpuGeneration.BLACKWELL_ULTRA
    rack, node = cluster_preset("gb300", 256), cluster_preset("b300", 16)
    assert (rack.gpus_per_node, rack.nic_bandwidth_Bps, node.gpus_per_node, node.nic_bandwidth_Bps) == (
        64,
        100e9,
        8,
        100e9,
    )
    assert nvls_all_reduce_efficiency("gb300", 8) == nvls_all_reduce_efficiency("gb200", 8) > 1
