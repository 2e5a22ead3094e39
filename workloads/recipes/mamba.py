"""Forward recipe of a hybrid model's Mamba-2 layer per GPU, as Megatron-Core's MambaLayer runs it.

megatron/core/ssm/mamba_mixer.py (NVIDIA/Megatron-LM d98e8a64dd) MambaMixer on its memory-efficient path (the one
trained): the layer's norm fused into in_proj (a TE LayerNorm column-parallel linear, like attention's QKV), which
writes z, x, B, C and dt; then mamba_ssm's ``mamba_split_conv1d_scan_combined``: the causal depthwise conv over x, B
and C with its SiLU (causal_conv1d), the chunked state-space scan (SSD, Dao and Gu, "Transformers are SSMs", ICML
2024: per chunk of Q tokens, C B^T masked and times X, each chunk's state B^T X, the states passed chunk to chunk, and
C times the incoming state), and the gated RMSNorm of y times SiLU(z) per group (RMSNormGated, norm before gate off);
then out_proj, a row-parallel linear. Tensor parallelism splits the heads and groups (ngroups must divide by TP),
and sequence parallelism gathers the layer's input and reduce-scatters its output as attention's TP block does.

Costs: the two projections are GEMMs; the conv and the gated norm are memory-bound kernels (their bytes below); so is
the scan, mamba_ssm's Triton SSD (``scan_bytes``): its token I/O and its FP32 chunk states, which its kernels write
and read several times (Calibration.scan_state_passes, from the one published timing of those kernels). The
memory-efficient path keeps in_proj's output and recomputes the conv in backward (counted in the conv's backward
bytes).
"""

from __future__ import annotations

from dataclasses import replace

from workloads.ops import BYTES_BF16, BYTES_FP32, GEMM, MEMORY, SCAN_BACKWARD_TIME_RATIO, Gemm, GraphPart, Step
from workloads.recipes.comm_pairs import tp_pair
from workloads.recipes.norms import norm_step
from workloads.recipes.residual import residual_step
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

# The conv's element passes: forward reads its input and writes the SiLU'd output; backward recomputes that
# (memory-efficient path) and reads the gradient and the input to write the input's gradient.
CONV_FWD_PASSES, CONV_BWD_PASSES, CONV_BWD_KERNELS = 2, 5, 2
# The scan's Triton kernels (mamba_ssm/ops/triton/ssd_combined.py _mamba_chunk_scan_combined_fwd: chunk cumsum,
# chunk state, state passing, C B^T per chunk, chunk scan), and those of its backward, which recomputes the forward's
# states before the gradient kernels (about twice as many)
SCAN_KERNELS, SCAN_BWD_KERNELS = 5, 10
# The gated norm: forward reads y and z and writes its output; backward reads the gradient, y and z and writes the
# gradients of y and z.
GATED_NORM_FWD_PASSES, GATED_NORM_BWD_PASSES = 3, 5


def scan_flops(model: ModelSpec, tokens: int, shards: int) -> float:
    """Forward matmul FLOPs of the chunked scan on ``tokens`` tokens of a GPU holding 1/``shards`` of the heads and
    groups, counted as TileLang's Mamba-2 benchmark counts its chunk scan (causal half of the chunk's Q x Q scores
    times X, plus C times the states; tile-ai/tilelang benchmark/mamba2): per head Q P + 2 P N per token, the chunk
    states B^T X 2 P N more, and per group the chunk's C B^T, Q N (causal half)."""
    q, p, n = model.mamba_chunk, model.mamba_head_dim, model.mamba_state_dim
    heads, groups = model.mamba_heads / shards, model.mamba_groups / shards
    return tokens * (heads * (q * p + 4 * p * n) + groups * q * n)


# The forward SSD's token I/O, per element of each tensor (mamba_ssm/ops/triton/ssd_combined.py
# _mamba_chunk_scan_combined_fwd): x read by the chunk-state and chunk-scan kernels and y written (BF16, heads x P per
# token), B and C read twice each (chunk state and C B^T; C B^T and chunk scan; BF16, groups x N), C B^T written and
# read back (FP32, groups x Q per token). The chunk states (batch, chunks, heads, P, N) are FP32 (states_in_fp32).
SCAN_X_PASSES, SCAN_BC_PASSES, SCAN_CB_PASSES = 3, 4, 2


def scan_bytes(
    tokens: float, heads: float, groups: float, head_dim: int, state_dim: int, chunk: int
) -> tuple[float, float]:
    """(token I/O bytes, bytes of one pass over the FP32 chunk states) of the forward SSD on ``tokens`` tokens of
    ``heads`` heads of ``head_dim`` and ``groups`` groups of B and C (state ``state_dim``), in chunks of ``chunk``."""
    per_token = (
        SCAN_X_PASSES * heads * head_dim * BYTES_BF16
        + SCAN_BC_PASSES * groups * state_dim * BYTES_BF16
        + SCAN_CB_PASSES * groups * chunk * BYTES_FP32
    )
    return tokens * per_token, tokens / chunk * heads * head_dim * state_dim * BYTES_FP32


def mamba_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Norm, in_proj, conv, scan, gated norm, out_proj and the residual of one Mamba-2 layer, TP-split with SP."""
    n, h = layout.intra_size, model.hidden_size
    tokens = layout.micro_batch * seq_len
    local = tokens // layout.sequence_shards
    act_local = local * h * BYTES_BF16
    inner = model.mamba_inner // n
    gather, scatter = tp_pair("mamba", n, tokens * h * BYTES_BF16, sequence_parallel=layout.sequence_parallel)
    conv_elements = tokens * model.mamba_conv_channels / n
    scan_io, scan_states = scan_bytes(
        tokens,
        model.mamba_heads / n,
        model.mamba_groups / n,
        model.mamba_head_dim,
        model.mamba_state_dim,
        model.mamba_chunk,
    )
    steps = [
        norm_step("mamba_norm", act_local),
        gather,
        Step("mamba_in_proj", GEMM, gemm=Gemm(tokens, model.mamba_in_proj_width // n, h), norm_input=True),
        Step(
            "mamba_conv1d",
            MEMORY,
            mem_bytes=CONV_FWD_PASSES * conv_elements * BYTES_BF16,
            bwd_mem_bytes=CONV_BWD_PASSES * conv_elements * BYTES_BF16,
            bwd_kernels=CONV_BWD_KERNELS,
        ),
        Step(
            "mamba_scan",
            MEMORY,
            mem_bytes=scan_io,
            kernels=SCAN_KERNELS,
            bwd_kernels=SCAN_BWD_KERNELS,
            bwd_mem_bytes=SCAN_BACKWARD_TIME_RATIO * scan_io,
            scan_flops=scan_flops(model, tokens, n),
            scan_state_bytes=scan_states,
        ),
        Step(
            "mamba_gated_norm",
            MEMORY,
            mem_bytes=GATED_NORM_FWD_PASSES * tokens * inner * BYTES_BF16,
            bwd_mem_bytes=GATED_NORM_BWD_PASSES * tokens * inner * BYTES_BF16,
        ),
        Step("mamba_out_proj", GEMM, gemm=Gemm(tokens, h, inner)),
        scatter,
        residual_step("mamba_residual", act_local),
    ]
    return [replace(step, graph=GraphPart.MAMBA) for step in steps]  # what --cuda-graph-modules mamba captures
