"""How much of its HBM bandwidth a Blackwell GPU's memory-bound kernels reach, relative to Hopper's.

Calibration.memory_efficiency (0.8) is anchored on Hopper kernels (H100 / H200). cuDNN's norm benchmark ran the same
kernels, shapes and cuDNN (backend 91901) on an H200, a GB200 and a GB300 (NVIDIA/cudnn-frontend
benchmark/norms/results/{h200,gb200,gb300}/all_models_*.csv, 2026-02-26 / 27): over the shapes big enough that a
kernel's fixed time is a few percent of it, a GB200 moves its bytes at 0.69 of its 8 TB/s and a GB300 at 0.70, where
the H200 moves them at 0.75 of its 4.8 TB/s. Blackwell's memory-bound kernels run at that ratio of Hopper's fraction:
0.918 (Blackwell, from the GB200) and 0.928 (Blackwell Ultra, from the GB300), applied to every Blackwell GPU's
memory-bound kernels (simulator.costs.generations). The forward norms alone give 0.95, the backward ones 0.88-0.90:
the aggregate counts both at the bytes a training step moves through them.
"""

from __future__ import annotations

from topologies.hardware import gpu_preset

# Backend "cudnn", BF16 RMSNorm, one row per model shape with at least 2^25 elements (rows N x hidden C): (name, N, C,
# H200 forward, H200 backward, GB200 forward, GB200 backward, GB300 forward, GB300 backward GB/s). The H200 run:
# NVIDIA/cudnn-frontend@df73764a benchmark/norms/results/h200/all_models_20260227_035147.csv; GB200 and GB300: @3929da2e
# (also in experiments/validation/blackwell/ratios.py) gb200/all_models_20260226_180237.csv, gb300/..._190305.csv.
# fmt: off
CUDNN_NORMS_GBPS: tuple[tuple[str, int, int, float, float, float, float, float, float], ...] = (
    ("llama3-8b", 16384, 4096, 3708.1, 3801.0, 6424.6, 6187.3, 6459.5, 6133.5),
    ("llama3-70b", 8192, 8192, 3770.9, 3526.2, 5997.4, 5200.5, 5962.9, 5467.3),
    ("llama31-405b", 4096, 16384, 3845.2, 3420.0, 6119.7, 4787.2, 6079.4, 4896.8),
    ("llama4-e16", 8192, 5120, 3762.0, 3658.5, 5986.8, 4950.7, 5979.9, 5058.6),
    ("mixtral-8x7b", 8192, 4096, 3790.3, 3499.9, 5843.7, 5633.7, 5968.1, 5534.3),
    ("nemotronh-56b", 4096, 8192, 3311.3, 3279.2, 5934.0, 4885.9, 5976.0, 4908.6),
    ("qwen3-235b", 8192, 5120, 3770.2, 3631.5, 6000.5, 5051.7, 6105.0, 5071.9),
)
# fmt: on
CUDNN_NORMS_SOURCE = "NVIDIA/cudnn-frontend benchmark/norms/results/{h200,gb200,gb300} (cuDNN 91901), 7 shapes"
# Element passes of one norm, in BF16 elements: forward reads x and writes y, backward reads x and dy and writes dx
# (the weights and per-row statistics are under 0.1% of it at these shapes).
FWD_PASSES, BWD_PASSES = 2, 3
_COLUMNS = {"h200": 3, "gb200": 5, "gb300": 7}


def achieved_fraction(gpu: str) -> float:
    """``gpu``'s bytes over its time through every row, forward and backward, over its preset's HBM bandwidth."""
    column = _COLUMNS[gpu]
    total_bytes = seconds = 0.0
    for row in CUDNN_NORMS_GBPS:
        for passes, gbps in ((FWD_PASSES, row[column]), (BWD_PASSES, row[column + 1])):
            nbytes = passes * row[1] * row[2] * 2
            total_bytes += nbytes
            seconds += nbytes / (gbps * 1e9)
    return total_bytes / seconds / gpu_preset(gpu).hbm_bandwidth_Bps


def over_hopper(gpu: str) -> float:
    """``gpu``'s achieved fraction of its HBM bandwidth over the H200's on the same benchmark."""
    return achieved_fraction(gpu) / achieved_fraction("h200")


BLACKWELL_HBM_FRACTION = over_hopper("gb200")
BLACKWELL_ULTRA_HBM_FRACTION = over_hopper("gb300")
