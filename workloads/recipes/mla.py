"""Multi-head latent attention (MLA, DeepSeek-V2 Sec. 2.1; DeepSeek-V3 Sec. 2.1.1): parameters and recipe.

Per token: the query is compressed to d_c' (q_lora_rank) and expanded to H (d_h + d_h^R); keys and values
share a latent of d_c (kv_lora_rank) plus one decoupled RoPE key of d_h^R, expanded to H (d_h + d_v);
the output projection maps H d_v back to h. Down/up projections are GEMMs; RMSNorms follow each latent.
"""

from __future__ import annotations

from workloads.ops import (
    ATTENTION,
    BYTES_BF16,
    GEMM,
    MEMORY,
    AttentionShape,
    Gemm,
    Module,
    Step,
    attention_flops,
    attention_pairs,
)
from workloads.recipes.comm_pairs import tp_pair, ulysses_pair
from workloads.recipes.dsv4_attention import indexer_steps, sparse_attention_step, window_pairs
from workloads.recipes.norms import norm_step
from workloads.recipes.residual import residual_step
from workloads.specs.layouts import LayoutSpec
from workloads.specs.model_extensions import qk_head_dim
from workloads.specs.models import ModelSpec

UP = Module.MLA_UP_PROJ  # Megatron-Core fuses each latent norm into its up projection


def mla_attention_flops(model: ModelSpec, layout: LayoutSpec, seq_len: int, window: int = 0) -> float:
    """Forward attention FLOPs per GPU, non-causal: 2 b s^2 (H/n) (d_qk + d_v) (QK^T and AV)."""
    heads_local = model.num_heads / layout.intra_size
    pairs = attention_pairs(seq_len, window)
    return attention_flops(layout.micro_batch, pairs, heads_local, qk_head_dim(model), model.v_head_dim)


def mla_recipe(
    model: ModelSpec, layout: LayoutSpec, seq_len: int, window: int = 0, indexer: bool = False
) -> list[Step]:
    """Norm, MLA down/up projections, FlashAttention, output projection: Ulysses SP (n >= 1) or TP. Under DSA
    (model.dsa): the attention over each query's index_topk keys, after the layer's ``indexer`` where it runs one."""
    n, h, heads = layout.intra_size, model.hidden_size, model.num_heads
    tokens = layout.micro_batch * seq_len
    q_rank, kv_rank, rope = model.q_lora_rank, model.kv_lora_rank, model.qk_rope_head_dim
    d_qk, d_v = qk_head_dim(model), model.v_head_dim
    tp = layout.attention == "tp" and n > 1
    rows = tokens if tp else tokens // n  # TP computes on the gathered sequence
    local_heads = heads // n if tp else heads
    act_local = tokens // n * h * BYTES_BF16
    steps = [norm_step("attn_norm", act_local, sar_recompute=True, module=Module.LAYERNORM)]
    gather, scatter = tp_pair("attn", n, tokens * h * BYTES_BF16)
    if tp:  # the latents are replicated over the TP group; up projections are split by heads
        steps.append(gather)
    if q_rank:
        steps += [
            Step("q_down", GEMM, gemm=Gemm(rows, q_rank, h)),
            norm_step("q_norm", rows * q_rank * BYTES_BF16, module=UP),
            Step("q_up", GEMM, gemm=Gemm(rows, local_heads * d_qk, q_rank), module=UP),
        ]
    else:
        steps.append(Step("q_proj", GEMM, gemm=Gemm(rows, local_heads * d_qk, h)))
    steps.append(Step("kv_down", GEMM, gemm=Gemm(rows, kv_rank + rope, h)))
    steps.append(norm_step("kv_norm", rows * kv_rank * BYTES_BF16, module=UP))
    residual = residual_step("attn_residual", act_local, dropout=model.hidden_dropout)
    if model.dsa:  # the absorbed form: no K / V up projection (absorbed_attention); under TP (validation.py)
        steps += dsa_indexer(model, layout, seq_len, rows) if indexer else []
        steps += absorbed_attention(model, layout, seq_len, rows, local_heads)
        return [*steps, scatter, residual] if tp else [*steps, residual]
    kv_width = local_heads * (model.qk_nope_head_dim + d_v)
    steps.append(Step("kv_up", GEMM, gemm=Gemm(rows, kv_width, kv_rank), module=UP))
    flops = mla_attention_flops(model, layout, seq_len, window)
    shape = AttentionShape(
        d_qk, d_v, seq_len, window=window, kernel=layout.attention_backend, dropout=model.attention_dropout > 0
    )
    flash = Step("flash_attn", ATTENTION, flops=flops, attention=shape, module=Module.CORE_ATTN)
    if tp:
        return steps + [
            flash,
            Step("o_proj", GEMM, gemm=Gemm(rows, h, local_heads * d_v)),
            scatter,
            residual,
        ]
    # Ulysses: Q (d_qk), K (d_qk, RoPE part broadcast) and V (d_v) of all heads to head shards, and back
    to_heads, to_sequence = ulysses_pair(
        n, rows * heads * (2 * d_qk + d_v) * BYTES_BF16, rows * heads * d_v * BYTES_BF16
    )
    steps += [to_heads, flash, to_sequence] if n > 1 else [flash]
    return steps + [Step("o_proj", GEMM, gemm=Gemm(rows, h, heads * d_v)), residual]


def dsa_indexer(model: ModelSpec, layout: LayoutSpec, seq_len: int, rows: int) -> list[Step]:
    """DSA's indexer on ``rows`` positions (DeepSeek-V3.2 Sec. 2.1; Megatron-Core DSAIndexer at d98e8a64: linear_wq_b
    from the query latent, linear_wk with its LayerNorm, linear_weights_proj, the Hadamard rotation of q and k,
    the scores of every key before each query, the top-k). Assumed: each GPU of a TP group indexes its gathered
    sequence whole, as it holds the latents."""
    dim = model.index_head_dim
    full = seq_len * layout.cp  # under CP: the GPU's queries against the gathered sequence's keys (apply_cp)
    keys = [
        Step("index_k", GEMM, gemm=Gemm(rows, dim, model.hidden_size)),
        norm_step("index_k_norm", rows * dim * BYTES_BF16),
        Step("index_rotate", MEMORY, mem_bytes=2 * rows * (model.index_heads + 1) * dim * BYTES_BF16, kernels=2),
    ]
    scored = layout.micro_batch * full * (full + 1) // 2 / layout.cp  # every key up to each query's own
    return indexer_steps(model, rows, model.q_lora_rank or model.hidden_size, keys, scored)


def absorbed_attention(model: ModelSpec, layout: LayoutSpec, seq_len: int, rows: int, heads: int) -> list[Step]:
    """DSA's attention in MLA's absorbed (MQA) form, as Megatron-Core runs it (AbsorbedMLASelfAttention at d98e8a64,
    experimental_attention_variant/absorbed_mla.py; DeepSeek-V3.2 Sec. 2.1): each head's query absorbed into the
    latent (q_nope times W_UK per head, an einsum), every query over the min(position, index_topk) keys its indexer
    picked, all heads sharing the latent key (kv_lora_rank + the RoPE dims) and value (kv_lora_rank), the output taken
    back per head by W_UV, then the output projection. The sparse kernel timed as the dsv4 attention's
    (workloads/recipes/dsv4_attention.py: FlashAttention's table at the mean keys, its widest head dim): 707 TFLOP/s
    forward at 2,048 keys on Hopper before the sustained clock, beside DeepSeek's FlashMLA token-level sparse prefill
    kernel for DSA, "up to 640 TFlops" on H800 (deepseek-ai/FlashMLA README, 2025-09-29); Megatron-Core's own sparse
    kernels (dsa_kernel_backend: TileLang, cuDNN) publish none."""
    kv_rank, nope, d_v = model.kv_lora_rank, model.qk_nope_head_dim, model.v_head_dim
    d_key = kv_rank + model.qk_rope_head_dim
    full = seq_len * layout.cp  # under CP (load-balanced chunks): 1/cp of the whole sequence's pairs on each GPU
    pairs = window_pairs(full, model.index_topk) / layout.cp
    return [  # the absorptions are torch.einsum calls on BF16 weights, not TE linear layers: BF16 in an FP8 run
        Step("q_absorb", GEMM, gemm=Gemm(rows, kv_rank, nope, heads), module=UP, bf16_only=True),
        sparse_attention_step(layout, seq_len, pairs, heads, d_key, kv_rank),
        Step("v_up", GEMM, gemm=Gemm(rows, d_v, kv_rank, heads), bf16_only=True),
        Step("o_proj", GEMM, gemm=Gemm(rows, model.hidden_size, heads * d_v)),
    ]
