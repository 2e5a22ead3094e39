"""Forward recipes of a hybrid model's recurrent mixers per GPU: the Mamba-2 layer, as Megatron-Core's MambaLayer runs
it, and the Gated DeltaNet layer (``gdn_recipe``, below).

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

from workloads.ops import (
    BYTES_BF16,
    BYTES_FP32,
    GEMM,
    MEMORY,
    SCAN_BACKWARD_TIME_RATIO,
    DeltaRule,
    Gemm,
    GraphPart,
    Step,
)
from workloads.recipes.comm_pairs import tp_pair
from workloads.recipes.norms import norm_step
from workloads.recipes.residual import residual_step
from workloads.specs.layouts import LayoutSpec
from workloads.specs.model_extensions import gdn_in_proj_width, gdn_widths
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
    n, tokens = layout.intra_size, layout.micro_batch * seq_len
    scan_io, scan_states = scan_bytes(
        tokens,
        model.mamba_heads / n,
        model.mamba_groups / n,
        model.mamba_head_dim,
        model.mamba_state_dim,
        model.mamba_chunk,
    )
    scan = Step(
        "mamba_scan",
        MEMORY,
        mem_bytes=scan_io,
        kernels=SCAN_KERNELS,
        bwd_kernels=SCAN_BWD_KERNELS,
        bwd_mem_bytes=SCAN_BACKWARD_TIME_RATIO * scan_io,
        scan_flops=scan_flops(model, tokens, n),
        scan_state_bytes=scan_states,
    )
    widths = (model.mamba_in_proj_width // n, model.mamba_conv_channels / n, model.mamba_inner // n)
    steps = _mixer("mamba", model, layout, seq_len, widths, [scan])
    return [replace(step, graph=GraphPart.MAMBA) for step in steps]  # what --cuda-graph-modules mamba captures


def _mixer(
    name: str, model: ModelSpec, layout: LayoutSpec, seq_len: int, widths: tuple[float, ...], core: list[Step]
) -> list[Step]:
    """A recurrent mixer's layer around its ``core`` steps: the norm, the SP gather, in_proj, the causal conv, then
    the gated norm, out_proj, the SP scatter and the residual; ``widths``: one GPU's in_proj output, conv channels and
    gated-norm (out_proj input) width."""
    n, h = layout.intra_size, model.hidden_size
    tokens = layout.micro_batch * seq_len
    act_local = tokens // layout.sequence_shards * h * BYTES_BF16
    in_width, conv_channels, inner = widths
    gather, scatter = tp_pair(name, n, tokens * h * BYTES_BF16, sequence_parallel=layout.sequence_parallel)
    conv = tokens * conv_channels
    return [
        norm_step(f"{name}_norm", act_local),
        gather,
        Step(f"{name}_in_proj", GEMM, gemm=Gemm(tokens, int(in_width), h), norm_input=True),
        Step(
            f"{name}_conv1d",
            MEMORY,
            mem_bytes=CONV_FWD_PASSES * conv * BYTES_BF16,
            bwd_mem_bytes=CONV_BWD_PASSES * conv * BYTES_BF16,
            bwd_kernels=CONV_BWD_KERNELS,
        ),
        *core,
        Step(
            f"{name}_gated_norm",
            MEMORY,
            mem_bytes=GATED_NORM_FWD_PASSES * tokens * inner * BYTES_BF16,
            bwd_mem_bytes=GATED_NORM_BWD_PASSES * tokens * inner * BYTES_BF16,
        ),
        Step(f"{name}_out_proj", GEMM, gemm=Gemm(tokens, h, int(inner))),
        scatter,
        residual_step(f"{name}_residual", act_local, dropout=model.hidden_dropout),
    ]


# The GDN layer's element passes beside its GEMMs (megatron/core/ssm/gated_delta_net/gdn.py at NVIDIA/Megatron-LM
# d98e8a64, GatedDeltaNet.forward; its helpers from flash-linear-attention): after in_proj, FLA's causal_conv1d with
# SiLU over q, k and v (the Mamba conv's passes), then _prepare_input_for_gated_delta_rule: q and k L2-normed (fla
# l2norm: each read and written) and q, k and v made contiguous for the kernel (each read and written), the decay
# -exp(A_log) softplus(alpha + dt_bias) and beta = sigmoid(b) per value head (FP32); the gated norm of the output with
# SiLU(z) (the Mamba gated norm's passes). The delta rule itself is FLA's chunk_gated_delta_rule at its measured time
# (simulator/costs/delta_rule.py): chunk_local_cumsum, chunk_scaled_dot_kkt, solve_tril, recompute_w_u, chunk_fwd_h
# and chunk_fwd_o forward, about ten kernels backward.
GDN_PREPARE_KERNELS, DELTA_RULE_KERNELS, DELTA_RULE_BWD_KERNELS = 7, 6, 10


def gdn_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Norm, in_proj, conv, input preparation, the chunked gated delta rule, gated norm, out_proj and the residual of one
    Gated DeltaNet layer (Qwen3-Next, Qwen3.5 / 3.6), TP-split by heads with SP, as Megatron-Core's hybrid model runs it:
    a TransformerLayer whose self-attention is GatedDeltaNet (megatron/core/models/hybrid/hybrid_block.py), so the
    attention's CUDA-graph scope captures it. Megatron's FLOP count of its recurrence: 4 value heads x d_v^2 per token
    (megatron/training/training.py gdn_layer_flops: K K^T, V K^T, the state update and S Q)."""
    n, tokens = layout.intra_size, layout.micro_batch * seq_len
    qk, v = (width // n for width in gdn_widths(model))
    value_heads = model.gdn_value_heads // n
    prepare = 2 * tokens * 2 * qk + 2 * tokens * (2 * qk + v)  # q and k L2-normed, q, k and v copied: read, written
    core = [
        Step("gdn_prepare", MEMORY, mem_bytes=prepare * BYTES_BF16, kernels=GDN_PREPARE_KERNELS),
        Step(
            "gdn_delta_rule",
            MEMORY,
            kernels=DELTA_RULE_KERNELS,
            bwd_kernels=DELTA_RULE_BWD_KERNELS,
            bwd_mem_bytes=0.0,
            scan_flops=2 * tokens * value_heads * model.gdn_value_head_dim**2 * 4,
            delta_rule=DeltaRule(tokens, value_heads, model.gdn_key_head_dim, model.gdn_value_head_dim),
        ),
    ]
    steps = _mixer("gdn", model, layout, seq_len, (gdn_in_proj_width(model) // n, 2 * qk + v, v), core)
    return [replace(step, graph=GraphPart.ATTN) for step in steps]
