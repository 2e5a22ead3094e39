"""Beyond the paper, hardware: the GB200 GPU preset and the gb200-nvl72 cluster (72-GPU NVLink domain)."""

from __future__ import annotations

from simulator.report.simulate import simulate
from topologies.cluster import cluster_preset
from topologies.hardware import gpu_preset
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
