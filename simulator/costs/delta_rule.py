"""The chunked gated delta rule of a Gated DeltaNet layer (Qwen3-Next, Qwen3.5 / 3.6), timed at its measured speed.

Megatron-Core's GatedDeltaNet (megatron/core/ssm/gated_delta_net/gdn.py at NVIDIA/Megatron-LM d98e8a64dd) runs the
recurrence with flash-linear-attention's Triton kernels (``fla.ops.gated_delta_rule.chunk_gated_delta_rule``): per
chunk of 64 tokens the K K^T solve, the W / U recompute, the chunk states passed one chunk to the next and the
output. Its kernels are bound by that sequential pass and by how few (batch, head) programs a GPU gets, not by the
tensor cores or HBM: FLA's time grows linearly with the tokens and far less than linearly with the heads, so no
FLOP or byte rate of the GPU would give it. Its one public timing across head counts and lengths is QwenLM/FlashQLA's
benchmark of the Qwen3.5 family's head configurations against FLA, head dim 128, BF16, CUDA-graph replay:
``benchmark/benchmark_results_H200.txt`` (FLA 0.5.1, torch 2.9.1+cu128) and ``benchmark_results_GB200.txt`` (FLA
0.5.2, torch 2.9.1+cu130) at QwenLM/FlashQLA@c18a486. The "FLA" columns are taken: forward, one sequence of 2,048
to 32,768 tokens; backward ("a single update step"), 8,192 and 32,768 tokens. The forward of several sequences
costs what one of their total length does (8192x4: 1.886 ms against 4 x 0.472 on the H200), so both are keyed by
the tokens of the micro-batch.

Between measured points: log-log in tokens, linear in value heads; beyond them, linear in tokens and along the
last head slope (fewer heads than measured: the fewest's time, the kernels' floor). A head dimension other than
128 scales the time by its (d_k d_v) / 128^2 (assumed: the chunk matmuls' work per head and token). Hopper and older
GPUs take the H200's table (H100 and H800 are the same GH100 at the same clocks; assumed for the A100 and H20),
Blackwell and Blackwell Ultra the GB200's. FLA is slower on the GB200 than on the H200 in backward (1.552 against
1.444 ms at 8,192 tokens, 32 heads): its Triton kernels are not tuned for SM100 (FlashQLA's own kernels are 2-4x
faster on both; Megatron-Core calls FLA's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

from simulator.costs.gemm_efficiency import interpolate_log
from topologies.hardware import GpuGeneration, GpuSpec

MEASURED_HEAD_DIM = 128
FORWARD_TOKENS = (2048, 4096, 8192, 16384, 32768)
BACKWARD_TOKENS = (8192, 32768)


@dataclass(frozen=True)
class DeltaRuleTable:
    """One GPU's FLA times in ms: value heads -> one time per length of FORWARD_TOKENS / BACKWARD_TOKENS."""

    forward_ms: dict[int, tuple[float, ...]]
    backward_ms: dict[int, tuple[float, ...]]


# Forward rows: 8 value heads (397B/122B TP8), 16 (TP4), 32 (35B/9B/4B TP1), 64 (397B/122B TP1); backward rows
# hk{2,4,8,16}_hv{4,8,16,32}, one sequence.
H200_FLA = DeltaRuleTable(
    forward_ms={
        8: (0.081, 0.132, 0.234, 0.455, 0.902),
        16: (0.098, 0.166, 0.316, 0.614, 1.241),
        32: (0.132, 0.247, 0.472, 0.930, 1.890),
        64: (0.220, 0.417, 0.814, 1.598, 3.331),
    },
    backward_ms={4: (0.606, 2.311), 8: (0.722, 2.743), 16: (0.957, 3.701), 32: (1.444, 5.697)},
)
GB200_FLA = DeltaRuleTable(
    forward_ms={
        8: (0.091, 0.152, 0.277, 0.550, 1.085),
        16: (0.105, 0.177, 0.346, 0.676, 1.324),
        32: (0.132, 0.250, 0.482, 0.931, 1.839),
        64: (0.208, 0.397, 0.761, 1.493, 2.997),
    },
    backward_ms={4: (0.709, 2.690), 8: (0.843, 3.191), 16: (1.088, 4.178), 32: (1.552, 6.171)},
)


def table_for(gpu: GpuSpec) -> DeltaRuleTable:
    """The measured table of ``gpu``'s generation (module docstring)."""
    blackwell = gpu.generation in (GpuGeneration.BLACKWELL, GpuGeneration.BLACKWELL_ULTRA)
    return GB200_FLA if blackwell else H200_FLA


def _along_tokens(lengths: tuple[int, ...], times: tuple[float, ...], tokens: float) -> float:
    """Log-log between measured lengths (interpolate_log over the log times); proportional to the tokens beyond them."""
    if tokens <= lengths[0]:
        return times[0] * tokens / lengths[0]
    if tokens >= lengths[-1]:
        return times[-1] * tokens / lengths[-1]
    return math.exp(interpolate_log(tuple(zip(lengths, map(math.log, times))), tokens))


def _along_heads(rows: dict[int, float], heads: float) -> float:
    """Linear in value heads between measured counts, along the last slope above them, the fewest's time below."""
    counts = sorted(rows)
    if heads <= counts[0]:
        return rows[counts[0]]
    pairs = list(pairwise(counts))
    for low, high in pairs:
        if heads <= high:
            break
    else:
        low, high = pairs[-1]
    return rows[low] + (heads - low) * (rows[high] - rows[low]) / (high - low)


def delta_rule_time_s(
    tokens: float, value_heads: float, key_head_dim: int, value_head_dim: int, backward: bool, gpu: GpuSpec
) -> float:
    """FLA's chunk_gated_delta_rule on ``tokens`` tokens (the micro-batch's, all sequences) and ``value_heads`` heads
    of one GPU: forward, or its backward."""
    table = table_for(gpu)
    lengths, rows = (BACKWARD_TOKENS, table.backward_ms) if backward else (FORWARD_TOKENS, table.forward_ms)
    at_heads = {heads: _along_tokens(lengths, times, tokens) for heads, times in rows.items()}
    width = key_head_dim * value_head_dim / MEASURED_HEAD_DIM**2
    return _along_heads(at_heads, value_heads) * width * 1e-3
