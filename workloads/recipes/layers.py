"""Forward recipes of one transformer layer per GPU: the one recipe path of every model and layout.

Attention (GQA here, MLA in workloads/recipes/mla.py) follows MegaScale-MoE Fig. 9 (Ulysses SP) and Megatron-LM's
TP with sequence parallelism; the FFN comes from workloads/recipes/moe.py; CP and FP8 are transforms of the
recipe (workloads/recipes/cp.py, workloads/specs/precision.py). Byte counts follow the paper's Eq. 1-4. All sizes are
per GPU, BF16 (2 bytes per element).
"""

from __future__ import annotations

from dataclasses import replace

from workloads.dispatchers.registry import DISPATCHERS
from workloads.ops import (
    ATTENTION,
    BYTES_BF16,
    GEMM,
    MEMORY,
    AttentionShape,
    Carries,
    Gemm,
    GraphPart,
    Module,
    Step,
    attention_flops,
    attention_pairs,
)
from workloads.recipes.comm_pairs import megatron_tp, tp_pair, ulysses_pair
from workloads.recipes.cp import apply_cp
from workloads.recipes.cross_entropy import cross_entropy_step
from workloads.recipes.dsv4_attention import dsv4_recipe
from workloads.recipes.fp8_quant import te_fp8_gathers
from workloads.recipes.mamba import gdn_recipe, mamba_recipe
from workloads.recipes.mla import mla_recipe
from workloads.recipes.moe import ffn_recipe
from workloads.recipes.norms import norm_step
from workloads.recipes.residual import hyper_connection_steps, input_grad_sums, megatron_qkv_copies, residual_step
from workloads.specs.cuda_graphs import tag_layer
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.precision import Fp8Recipe, to_fp8_comm, to_fp8_gemms


def layer_attention_flops(model: ModelSpec, layout: LayoutSpec, seq_len: int, window: int = 0) -> float:
    """Forward attention FLOPs per GPU: QK^T and AV for heads/n heads over ``attention_pairs`` (s x s
    without a window: FlashAttention's and Megatron's non-causal convention)."""
    heads_local = model.num_heads / layout.intra_size
    pairs = attention_pairs(seq_len, window)
    return attention_flops(layout.micro_batch, pairs, heads_local, model.head_dim, model.head_dim)


# Megatron's rotary table: one FP32 angle per position and head dimension ([s, 1, 1, d]; RotaryEmbedding.forward,
# megatron/core/models/common/embeddings/rotary_pos_embedding.py), read by the RoPE kernel of q and of k.
ROPE_FREQS_BYTES = 4


def qk_steps(model: ModelSpec, positions: int, shards: int) -> list[Step]:
    """The per-head RMSNorm of q and k and the rotary embedding of q and k, between the QKV projection and core
    attention, on ``positions`` token positions of a GPU holding 1/``shards`` of the heads: one kernel per tensor
    each (Megatron-Core SelfAttention.get_query_key_value_tensors runs q_layernorm then k_layernorm; Attention.
    forward applies the fused rotary embedding to query and to key, megatron/core/transformer/attention.py).
    Each kernel reads and writes its tensor once (BF16); RoPE also reads the FP32 angle table."""
    elements = positions * (model.q_width + model.num_kv_heads * model.head_dim) / shards
    steps = []
    if model.qk_layernorm:
        steps.append(norm_step("qk_norm", elements * BYTES_BF16, tensors=2))
    if model.rope:
        freqs = 2 * positions * model.head_dim * ROPE_FREQS_BYTES
        if model.rope_unfused:
            steps.append(unfused_rope_step(elements, positions * model.head_dim))
        else:
            # backward: TE's fused_rope_backward reads the gradient and the angles and writes the input gradient,
            # one kernel per tensor, the forward's bytes (NVIDIA/TransformerEngine@d0067d0d
            # transformer_engine/pytorch/attention/rope.py FusedRoPEFunc.backward, common/fused_rope/fused_rope.cu)
            rope_bytes = 2 * elements * BYTES_BF16 + freqs
            steps.append(Step("rope", MEMORY, mem_bytes=rope_bytes, kernels=2, bwd_mem_bytes=rope_bytes))
    return steps


def unfused_rope_step(elements: float, angles: int) -> Step:
    """Megatron-Core's unfused RoPE (rope_utils._apply_rotary_pos_emb_bshd at core_v0.17.0) on q, then on k:
    ``elements`` BF16 values of both, ``angles`` FP32 angles (positions x head dim) in the table.

    Per call, forward: cos and sin of the table, each times mscale and cast to BF16 (3 small kernels apiece:
    read 4 write 4, read 4 write 4, read 4 write 2 B per angle); t x cos (read and write: 4 B per element),
    the rotated half (-x2: 2 B; the cat of the halves: 4 B), times sin (4 B), the sum (6 B) and the cat with
    the empty pass-through part (4 B): 24 B per element in 6 kernels. Backward (autograd): the gradient times
    sin (4 B), the negated half (2 B), the cat of the chunks' gradients (4 B), times cos (4 B), the sum of the
    two paths (6 B) and the slice's zero-filled copy (2 + 4 B): 26 B per element in 7 kernels. The empty
    pass-through slice's own zero gradient is not counted."""
    table = 2 * angles * (8 + 8 + 6)  # cos and sin
    return Step(
        "rope",
        MEMORY,
        mem_bytes=24 * elements + 2 * table,
        kernels=2 * (6 + 6),
        bwd_mem_bytes=26 * elements,
        bwd_kernels=2 * 7,
    )


def te_layers(layout: LayoutSpec) -> bool:
    """Whether the layout's layers are Megatron-Core's with Transformer Engine modules (a Megatron token dispatcher),
    whose kernels workloads/recipes/residual.py megatron_qkv_copies and fp8_quant.te_fp8_gathers follow;
    MegaScale-MoE's own stack does not publish its kernels."""
    return bool(DISPATCHERS[layout.token_dispatcher].megatron)


def attention_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int, window: int = 0) -> list[Step]:
    """Norm, QKV projection, FlashAttention, output projection, residual: TP or Ulysses SP."""
    n, h, q = layout.intra_size, model.hidden_size, model.q_width
    tokens = layout.micro_batch * seq_len
    local = tokens // layout.sequence_shards  # tokens per GPU outside the TP block: s/n, or s without SP
    act_local = local * h * BYTES_BF16  # one [b, s/n, h] activation
    norm = norm_step("attn_norm", act_local, sar_recompute=True, module=Module.LAYERNORM)
    residual = residual_step("attn_residual", act_local, dropout=model.hidden_dropout)
    flops = layer_attention_flops(model, layout, seq_len, window)
    shape = AttentionShape(
        model.head_dim,
        model.head_dim,
        seq_len,
        window=window,
        kernel=layout.attention_backend,
        dropout=model.attention_dropout > 0,
    )
    flash = Step("flash_attn", ATTENTION, flops=flops, attention=shape, module=Module.CORE_ATTN)
    qkv_width = model.qkv_width + (q if model.attention_output_gate else 0)  # the gate: a second query's width
    gate = output_gate_steps(model, tokens, n)
    if layout.attention == "sp":
        to_heads, to_sequence = ulysses_pair(n, local * qkv_width * BYTES_BF16, local * q * BYTES_BF16)
        return [
            norm,
            Step("qkv_proj", GEMM, gemm=Gemm(local, qkv_width, h)),
            to_heads,  # after the all-to-all (which fuses into the QKV GEMM): n-th of the heads, every position
            *qk_steps(model, tokens, n),
            flash,
            *gate,
            to_sequence,
            Step("o_proj", GEMM, gemm=Gemm(local, h, q)),
            residual,
        ]
    # Eq. 1: AG the sharded input, RS the output (without SP: all-reduce the output, and the input's gradient)
    gather, scatter = tp_pair("attn", n, tokens * h * BYTES_BF16, sequence_parallel=layout.sequence_parallel)
    return [
        norm,
        gather,
        # TELayerNormColumnParallelLinear: the norm inside TE's module (NVIDIA/Megatron-LM@d98e8a64
        # megatron/core/models/gpt/gpt_layer_specs.py, linear_qkv=backend.column_parallel_layer_norm_linear())
        Step("qkv_proj", GEMM, gemm=Gemm(tokens, qkv_width // n, h), norm_input=True),
        *(megatron_qkv_copies(model, tokens, n) if te_layers(layout) else []),
        *qk_steps(model, tokens, n),
        flash,
        *gate,
        Step("o_proj", GEMM, gemm=Gemm(tokens, h, q // n)),
        scatter,
        residual,
    ]


# Megatron-Core's attention output gate, eager torch ops over the attention output's elements
# (megatron/core/transformer/attention.py _apply_output_gate at d98e8a64): the gate made contiguous (BF16 read and
# written), cast to FP32 (2 + 4 B), its sigmoid (4 + 4), the output times it in FP32 (2 + 4 read, 4 written), back to
# BF16 (4 + 2): 34 B per element in 5 kernels.
OUTPUT_GATE_BYTES, OUTPUT_GATE_KERNELS = 4 + 6 + 8 + 10 + 6, 5


def output_gate_steps(model: ModelSpec, tokens: int, n: int) -> list[Step]:
    """The sigmoid gate on the attention output (ModelSpec.attention_output_gate; none without it)."""
    if not model.attention_output_gate:
        return []
    gate_bytes = OUTPUT_GATE_BYTES * tokens * model.q_width / n
    return [
        Step("attn_output_gate", MEMORY, mem_bytes=gate_bytes, kernels=OUTPUT_GATE_KERNELS, module=Module.CORE_ATTN)
    ]


# A hybrid model's recurrent mixer blocks: the whole layer is the mixer (workloads/recipes/mamba.py)
MIXER_RECIPES = {"mamba": mamba_recipe, "gdn": gdn_recipe}


def layer_recipe(
    model: ModelSpec,
    layout: LayoutSpec,
    seq_len: int,
    gpus_per_node: int,
    dense: bool = False,
    window: int = 0,
    block: str = "",
    compress: int = 0,
    indexer: bool = False,
) -> list[Step]:
    """The forward steps of one layer on one GPU (dense or MoE FFN, attention over a ``window`` of keys or
    all of them, DeepSeek-V4's with its keys ``compress``ed, DSA's with or without its ``indexer``; a hybrid model's
    ``block`` alone: workloads.ops.LayerKind), with CP, mHC and the GEMM / comm precision."""
    local_seq = seq_len // layout.cp  # CP: every op but attention sees the GPU's s/cp tokens (workloads/recipes/cp.py)
    attention: list[Step] = []
    if block in ("", "attention") and model.attention == "dsv4":
        attention = dsv4_recipe(model, layout, seq_len, compress)
    elif block in ("", "attention"):
        if model.attention == "mla":
            recipe = mla_recipe(model, layout, local_seq, window, indexer)
        else:
            recipe = attention_recipe(model, layout, local_seq, window)
        attention = apply_cp(recipe, model, layout, seq_len, gpus_per_node, window)
    ffn: list[Step] = []
    if block in ("", "mlp", "moe"):
        act_local = layout.micro_batch * local_seq // layout.sequence_shards * model.hidden_size * BYTES_BF16
        # the MLP's input feeds its norm and its residual: their gradients are summed after the norm's backward
        branch_sum = input_grad_sums("ffn_input_grad_sum", act_local, 2, Module.NONE, GraphPart.NONE)
        residual = residual_step("mlp_residual", act_local, backward=False, dropout=model.hidden_dropout)
        ffn = [*branch_sum, *ffn_recipe(model, layout, local_seq, gpus_per_node, dense), residual]
    if model.residual_streams > 1:
        tokens = layout.micro_batch * local_seq // layout.sequence_shards
        attention, ffn = (
            with_hyper_connections(part, name, model, tokens, layout)
            for part, name in ((attention, "attn"), (ffn, "mlp"))
        )
    mixer = MIXER_RECIPES.get(block)
    steps = mixer(model, layout, local_seq) if mixer else tag_layer(attention, ffn, dense)
    steps = to_fp8_gemms(steps, layout.intra_size, layout.fp8_recipe) if layout.gemm_dtype == "fp8" else steps
    if layout.comm_dtype == "fp8":
        return to_fp8_comm(steps)
    # TE's SP linear layers gather their FP8 input (and dY) themselves, whatever the job's communication precision
    return (
        te_fp8_gathers(steps, Fp8Recipe(layout.fp8_recipe))
        if layout.gemm_dtype == "fp8" and te_layers(layout)
        else steps
    )


def with_hyper_connections(
    steps: list[Step], name: str, model: ModelSpec, tokens: int, layout: LayoutSpec
) -> list[Step]:
    """A block's steps under mHC: the mappings and aggregation before it, the n-stream merge for its residual add."""
    if not steps:
        return steps
    pre, merge = hyper_connection_steps(name, model, tokens, layout.fused_mhc)
    return [*pre, *(merge if step.name == f"{name}_residual" else step for step in steps)]


def head_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Final norm, output projection over the vocabulary and cross-entropy on the last stage. The projection
    and the loss are counted per local token over the whole vocabulary: under TP the same FLOPs and bytes as
    Megatron's vocabulary-parallel head (every token, 1/t of the vocabulary).

    Under Megatron's TP the head is a ColumnParallelLinear (megatron/core/models/gpt/gpt_model.py output_layer at
    NVIDIA/Megatron-LM 2edffadb): its input comes in through tp_pair's entry, an all-gather of the sequence shards
    with SP (a reduce-scatter of the gradient back), else an all-reduce of the gradient in backward. Megatron's
    own linear layer, not one of TE's userbuffers layers: the forward all-gather runs before the GEMM, the
    backward's re-gather and reduce-scatter beside the dgrad and wgrad GEMMs as in the other TP layers
    (workloads/graph/op_lists.py tp_linear)."""
    local = layout.micro_batch * seq_len // layout.intra_size
    norm_tokens = layout.micro_batch * seq_len // layout.sequence_shards
    norm = norm_step("final_norm", norm_tokens * model.hidden_size * BYTES_BF16)
    head = [
        Step("lm_head", GEMM, gemm=Gemm(local, model.vocab_size, model.hidden_size), bf16_only=True),
        cross_entropy_step(layout.cross_entropy, local * model.vocab_size, layout.micro_batch),
    ]
    if not megatron_tp(layout):  # (MegaScale-MoE's own TP does not publish its head's exchange)
        return [norm, *head]
    full_bytes = layout.micro_batch * seq_len * model.hidden_size * BYTES_BF16
    gather, _ = tp_pair("head", layout.intra_size, full_bytes, sequence_parallel=layout.sequence_parallel)
    return [norm, replace(gather, te_linear=False, carries=Carries.OTHER), *head]


def mtp_projection_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """A multi-token prediction module's input (DeepSeek-V3 Sec. 2.2): the shifted tokens' embedding, RMSNorm
    of it and of the previous depth's hidden state, and the projection of their concatenation (2h -> h)."""
    local = layout.micro_batch * seq_len // layout.intra_size
    act = local * model.hidden_size * BYTES_BF16
    return [
        Step("mtp_embedding", MEMORY, mem_bytes=2 * act),
        Step("mtp_norms", MEMORY, mem_bytes=4 * act),
        Step("mtp_proj", GEMM, gemm=Gemm(local, model.hidden_size, 2 * model.hidden_size)),
    ]


def paper_volumes_bytes(model: ModelSpec, n: int, micro_batch: int, seq_len: int) -> dict[str, float]:
    """The paper's per-GPU, per-layer forward volumes (Eq. 1-4), in bytes (BF16).

    Eq. 2 as printed is twice the egress of Ulysses' two all-to-alls (Q/K/V in, output back:
    (2 + 2/m) bsh/n elements x (n-1)/n); the simulator moves the physical bytes, i.e. half of Eq. 2.
    Eq. 1, 3 and 4 equal the physical egress of AG + RS and of dispatch + combine.
    """
    activation = micro_batch * seq_len * model.hidden_size * BYTES_BF16  # bsh in bytes
    tp = 2 * activation * (n - 1) / n  # Eq. 1 and Eq. 4
    return {
        "activation": activation,
        "tp_attention": tp,
        "sp_attention": tp * (2 + 2 / model.q_per_kv) / n,  # Eq. 2
        "ep_ffn_all_to_all": model.top_k / n * tp,  # Eq. 3
        "tp_ffn": tp,  # Eq. 4
        "dispatch_per_token": model.top_k * model.hidden_size * BYTES_BF16,
    }
