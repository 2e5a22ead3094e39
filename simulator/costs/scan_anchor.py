"""How many times a Mamba-2 scan's kernels pass over its chunk states: from the one published timing of the Triton SSD
Megatron-Core runs (mamba_ssm's ``mamba_chunk_scan_combined``, under ``mamba_split_conv1d_scan_combined``).

NVIDIA/cudnn-frontend benchmark/linear_attention/results/mamba2/b200/2026-09-17-bf16.json ("triton_forward", no gate):
on a B200, batch 2 x 2,048 tokens, 64 heads of 64, state 64, one group, chunk 32, BF16, replayed from a CUDA graph,
141.07 us forward (674.47 us backward: workloads/ops.py SCAN_BACKWARD_TIME_RATIO). Its kernels are bound by memory,
not by their matmuls: the chunk states, (chunks, heads, 64, 64) in FP32, are 1 MB a chunk of 32 tokens. Less its 5
kernels' fixed time, the forward moves at the B200's memory-bound bandwidth the token I/O the recipe counts
(workloads/recipes/mamba.py scan_bytes) and 4.9 passes over the states: the state written, passed (read, written) and
read, a little more. The benchmark's chunk of 32 is not Megatron's 128 (its README: the snapshot "does not ...
predict N=128 performance"); the passes are taken to carry over, the chunk and state sizes setting the bytes.
Until then (issue 40) the scan's FLOPs were timed at TileLang's chunk_scan_fwd rate on an H800 (0.137 of the BF16 peak,
tile-ai/tilelang benchmark/mamba2, PR #1109), a larger shape of another implementation: 5.4x this forward's time at
this shape, and 13x its backward's at twice the forward's FLOPs.
"""

from __future__ import annotations

from simulator.costs.hbm_fraction import BLACKWELL_HBM_FRACTION
from topologies.hardware import gpu_preset
from workloads.ops import TRITON_SSD_FORWARD_S
from workloads.recipes.mamba import SCAN_KERNELS, scan_bytes

# The benchmark's shape (above)
BATCH, SEQ_LEN, HEADS, HEAD_DIM, STATE_DIM, GROUPS, CHUNK = 2, 2048, 64, 64, 64, 1, 32


def measured_state_passes(memory_efficiency: float, graph_kernel_overhead_s: float) -> float:
    """The passes over the chunk states that make the benchmark's forward time at a B200's memory-bound bandwidth."""
    io, states = scan_bytes(BATCH * SEQ_LEN, HEADS, GROUPS, HEAD_DIM, STATE_DIM, CHUNK)
    # generations.memory_bandwidth_Bps's product, written out: generations imports the calibration this default is for
    bandwidth = gpu_preset("b200").hbm_bandwidth_Bps * memory_efficiency * BLACKWELL_HBM_FRACTION
    moved = (TRITON_SSD_FORWARD_S - SCAN_KERNELS * graph_kernel_overhead_s) * bandwidth
    return (moved - io) / states
