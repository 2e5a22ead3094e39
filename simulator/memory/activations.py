"""Activations a Megatron-Core layer (Transformer Engine modules) saves for its backward pass, tensor by tensor.

The inventory follows Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
(MLSys'23), Sec. 4.1: per layer, attention keeps its QKV-GEMM input, Q, K, V, the softmax tensors and
the output-projection input; the MLP its two GEMM inputs and the activation's input; each norm its input.
With tensor parallelism and sequence parallelism (their Sec. 4.2.2) every tensor is split over the t GPUs,
so each GPU keeps per *local token* (b s / (t cp) of them) the full-width counts below. What differs from
the paper's 34 s b h / t, and why:

- FlashAttention stores no s x s tensor: the 5 a s^2 b term is gone (the paper's Sec. 5 remark; FlashAttention
  keeps Q, K, V, the output O and the FP32 log-sum-exp per head and query).
- Dropout masks (their 2 s b h) only under hidden dropout: one bool per element after each block (the attention,
  the FFN, a Mamba or Gated DeltaNet mixer); the Megatron-Bridge recipes train with hidden and attention dropout 0,
  and PyTorch's dropout at p = 0 returns its input without a mask (aten/src/ATen/native/Dropout.cpp). Attention
  dropout keeps none: the fused kernel regenerates its random numbers from a saved seed in backward.
- SwiGLU: fc1 is 2F wide and its output is the activation's input; fc2's input is F wide. A plain MLP (GeLU,
  squared ReLU): fc1 is F wide.
- FP8 (TE ``_Linear.forward``, "Cache state for backward pass": ``saved_inputmat`` is the quantized input,
  ``update_usage`` keeps only the copy the wgrad GEMM needs, and under sequence parallelism the local shard,
  re-gathered in backward): every TE GEMM input is saved at one byte. The router stays BF16.
- MoE (Megatron-Core ``TEGroupedMLP``): the experts save their dispatched inputs, fc1's output and fc2's
  input per routed copy; the routing probabilities are applied inside the activation
  (``weighted_bias_swiglu_impl``), so fc2's output is not kept; the router keeps its BF16 input and its
  FP32 scores.

Each tensor names the module whose selective recomputation discards it (``Module.rerun_by``).
"""

from __future__ import annotations

from typing import NamedTuple

from workloads.ops import BYTES_BF16, BYTES_FP32, Module
from workloads.recipes.activation import eager_saved
from workloads.recipes.layers import te_layers
from workloads.recipes.residual import MASK_BYTES
from workloads.specs.layouts import LayoutSpec
from workloads.specs.model_extensions import gdn_widths
from workloads.specs.models import ModelSpec
from workloads.specs.precision import MXFP8_BLOCK, Fp8Recipe

BYTES_FP8 = 1
BYTES_E5M6 = 12 / 8  # DeepSeek-V3's 12-bit activation format (1 sign, 5 exponent, 6 mantissa bits; Sec. 3.3.3)
BYTES_INDEX = 8  # int64


class Saved(NamedTuple):
    """One tensor kept for backward: bytes per local token, the module whose recomputation frees it, and
    whether it lies between the TP blocks (split over the sequence under sequence parallelism, whole on every
    TP rank without it: Korthikanti Sec. 4.2.2, the 10 s b h of 10 + 24/t)."""

    name: str
    bytes_per_token: float
    module: Module = Module.NONE
    between_tp_blocks: bool = False


def gemm_input_bytes(layout: LayoutSpec) -> float:
    """Bytes per element of a saved GEMM input: FP8 under FP8 training (TE saves the quantized input), else BF16.
    MXFP8 keeps one E8M0 scale byte per 32 elements beside its data (TE's MXFP8Tensor ``_columnwise_scale_inv``, the
    copy the wgrad GEMM reads; transformer_engine/pytorch/ops/fused/grouped_mlp.py at NVIDIA/TransformerEngine
    d0067d0d saves the experts' FC1 and FC2 inputs so, "MXFP8 wgrad only needs columnwise tiles")."""
    if layout.gemm_dtype != "fp8":
        return BYTES_BF16
    return BYTES_FP8 * (1 + 1 / MXFP8_BLOCK) if layout.fp8_recipe == Fp8Recipe.MXFP8 else BYTES_FP8


def attention_saved(model: ModelSpec, layout: LayoutSpec, seq_len: int = 0) -> list[Saved]:
    """Attention's saved tensors per local token (GQA or MLA); unfused attention's scores need ``seq_len``."""
    h, heads = model.hidden_size, model.num_heads
    g = gemm_input_bytes(layout)
    fp8 = layout.gemm_dtype == "fp8"
    saved = [Saved("attn_norm_input", BYTES_BF16 * h, between_tp_blocks=True)]  # Korthikanti 4.1: a norm's input
    if model.attention == "mla":
        saved += _mla_projections_saved(model, layout)
        v_width = heads * model.v_head_dim
    elif model.attention == "dsv4":
        saved += _dsv4_projections_saved(model, layout)
        v_width = model.q_width
    else:
        # TE fuses the norm into the QKV GEMM (LayerNormLinear), which keeps the norm output as its input
        saved.append(Saved("qkv_input", g * h, between_tp_blocks=True))
        kv_width = model.num_kv_heads * model.head_dim
        saved.append(Saved("q_k_v", BYTES_BF16 * (model.q_width + 2 * kv_width)))  # Korthikanti: QK^T 4sbh, V 2sbh
        v_width = model.q_width
    if layout.fp8_activation_cache:  # DeepSeek-V3 Sec. 3.3.3: one E5M6 copy of O for attention and the projection
        saved.append(Saved("attn_out_e5m6", BYTES_E5M6 * v_width))
    else:
        saved.append(Saved("attn_out", BYTES_BF16 * v_width))  # FlashAttention's O = the output projection's input
    if layout.attention_backend == "unfused":  # Korthikanti 4.1's 5 a s^2 b: probabilities, dropout mask and output
        per_score = BYTES_BF16 + (MASK_BYTES + BYTES_BF16 if model.attention_dropout else 0)
        saved.append(Saved("attn_scores", per_score * heads * seq_len, Module.CORE_ATTN))
    else:
        saved.append(Saved("attn_lse", BYTES_FP32 * heads))  # FlashAttention's log-sum-exp, FP32 per head
    if model.attention_output_gate:  # the gate (BF16) and its FP32 sigmoid, the multiply's inputs
        saved.append(Saved("attn_output_gate", (BYTES_BF16 + BYTES_FP32) * model.q_width, Module.CORE_ATTN))
    if fp8 and not layout.fp8_activation_cache:
        saved.append(Saved("out_proj_input_fp8", g * v_width))  # TE's quantized copy of O
    return saved


def _mla_projections_saved(model: ModelSpec, layout: LayoutSpec) -> list[Saved]:
    """MLA (DeepSeek-V2 Sec. 2.1; Megatron-Core ``MLASelfAttention``): the input norm is its own module (two
    GEMMs read it); the down projections run on local tokens; the latents are gathered over TP and each up
    projection fuses its latent's norm; the up projections' outputs are Q, K and V."""
    h, heads, t = model.hidden_size, model.num_heads, _tp(layout)
    g = gemm_input_bytes(layout)
    downs = 2 if model.q_lora_rank else 1
    latents = model.q_lora_rank + model.kv_lora_rank
    d_qk = model.qk_nope_head_dim + model.qk_rope_head_dim
    if layout.gemm_dtype == "fp8":  # each down projection keeps its own FP8 copy of the norm output
        inputs = [Saved("down_proj_inputs_fp8", downs * g * h)]
    else:  # one BF16 norm output, read by both down projections
        inputs = [Saved("attn_norm_output", BYTES_BF16 * h, Module.LAYERNORM)]
    # the up projections' outputs: Q, K and V per head; under DSA's absorbed form (workloads/recipes/mla.py
    # absorbed_attention) the absorbed queries, the shared latent key and the per-head latent outputs
    q_k_v = heads * (2 * d_qk + model.v_head_dim)
    if model.dsa:
        d_key = model.kv_lora_rank + model.qk_rope_head_dim
        q_k_v = heads * d_key + d_key + heads * model.kv_lora_rank
    # DSA's indexer (workloads/recipes/mla.py dsa_indexer): its queries, key and head weights, and the top-k indices
    # (int64: torch.topk), every GPU of a TP group holding its whole sequence's
    index = model.index_heads * model.index_head_dim + model.index_head_dim + model.index_heads
    dsa = [Saved("dsa_indexer", t * (BYTES_BF16 * index + BYTES_INDEX * model.index_topk))] if model.dsa else []
    if model.dsa and layout.cp > 1:  # the CP group's gathered keys and values (workloads/recipes/cp.py dsa_cp_gather)
        gathered = 2 * model.kv_lora_rank + model.qk_rope_head_dim + model.index_head_dim
        dsa.append(Saved("dsa_cp_gathered", (layout.cp - 1) * BYTES_BF16 * gathered))
    return [
        *inputs,
        *dsa,
        Saved("latents", t * BYTES_BF16 * latents),  # the latent norms' inputs, full sequence on each GPU
        Saved("up_proj_inputs", t * g * latents, Module.MLA_UP_PROJ),  # the latent norms' outputs
        Saved("q_k_v", BYTES_BF16 * q_k_v, Module.MLA_UP_PROJ),
    ]


def _dsv4_projections_saved(model: ModelSpec, layout: LayoutSpec) -> list[Saved]:
    """DeepSeek-V4's attention (workloads/recipes/dsv4_attention.py) at TP 1, its CSA layers' (the most it keeps):
    the norm output its projections read (one FP8 copy each under FP8), the query latent with its normalized copy,
    the queries and the shared key-value head, the compressed keys (1 in 4 tokens) and the indexer's queries,
    compressor inputs and top-k indices (int64: torch.topk, as DSA's). Assumed as MLA's: each GEMM keeps its input."""
    h, g, d = model.hidden_size, gemm_input_bytes(layout), model.head_dim
    projections = 4 if 4 in model.compress_ratios else 3  # q down, kv, compressor (and the indexer's weights)
    inputs = projections * g * h if layout.gemm_dtype == "fp8" else BYTES_BF16 * h
    index = model.index_heads * model.index_head_dim
    return [
        Saved("attn_norm_output", inputs, Module.LAYERNORM),
        Saved("q_latent", BYTES_BF16 * model.q_lora_rank),
        Saved("up_proj_inputs", g * model.q_lora_rank, Module.MLA_UP_PROJ),
        Saved("q_kv", BYTES_BF16 * (model.q_width + d), Module.MLA_UP_PROJ),
        Saved("compressed_kv", BYTES_BF16 * d / 4),
        Saved("indexer", BYTES_BF16 * (index + model.index_heads) + BYTES_INDEX * model.index_topk),
        Saved("out_group_proj_input", g * model.o_groups * model.o_lora_rank),
    ]


def dense_mlp_saved(width: int, model: ModelSpec, layout: LayoutSpec, module: Module, name: str) -> list[Saved]:
    """An MLP of ``width`` (split over TP): fc1's input, fc1's output (the activation's input), fc2's input
    (Korthikanti Sec. 4.1's "first linear", "GeLU input" and "second linear" tensors)."""
    g = gemm_input_bytes(layout)
    saved = [
        Saved(f"{name}_fc1_input", g * model.hidden_size, module, between_tp_blocks=True),
        Saved(f"{name}_fc1_output", BYTES_BF16 * model.fc1_widths * width, module),
        Saved(f"{name}_fc2_input", g * width, module),
    ]
    extra = eager_saved(model.gated_ffn, probs=False)
    if (
        not layout.fused_activation and extra
    ):  # the eager activation's own saved tensors (workloads/recipes/activation.py)
        saved.append(Saved(f"{name}_act_eager", extra * BYTES_BF16 * width, module))
    return saved


def moe_saved(model: ModelSpec, layout: LayoutSpec) -> list[Saved]:
    """An MoE layer's saved tensors per local token: router, routed experts, shared experts.

    Each local token has k routed copies on the expert GPUs (balanced routing); expert-tensor parallelism
    over e GPUs (or TP experts over t) gathers every copy onto each of them at width F / e, so the copies
    are k e at F / e; capacity-padded buffers hold capacity_factor times as many rows (not when dropless), a static
    per-rank budget expert_rank_capacity times, the paged stash's pages paged_stash_factor times (LayoutSpec).
    """
    h, k, width = model.hidden_size, model.top_k, model.expert_ffn_size
    g = gemm_input_bytes(layout)
    split = _tp(layout) if layout.ffn == "tp" else layout.etp
    pad = 1.0 if layout.dropless else layout.capacity_factor
    # a static per-rank budget keeps budget-sized tensors; the paged stash keeps pages sized by the average
    pad = layout.paged_stash_factor or layout.expert_rank_capacity or pad
    copies = k * split * pad
    moe, act = Module.MOE, Module.MOE_ACT
    saved = [
        Saved("router_input", BYTES_BF16 * h, Module.LAYERNORM, True),  # pre_mlp_layernorm's output (own module)
        Saved("router_scores", BYTES_FP32 * model.num_experts, moe),
        Saved("expert_fc1_input", copies * g * model.routed_width, moe),
        # the activation's input: FP8 under DeepSeek-V3's activation cache (Sec. 3.3.3), else BF16
        Saved(
            "expert_fc1_output",
            copies * (BYTES_FP8 if layout.fp8_activation_cache else BYTES_BF16) * model.fc1_widths * width / split,
            moe,
        ),
        Saved("expert_fc2_input", copies * g * width / split, act),
    ]
    extra = eager_saved(model.gated_ffn, probs=True)
    if not layout.fused_activation:  # the eager activation's own saved tensors (workloads/recipes/activation.py)
        saved.append(Saved("expert_act_eager", copies * extra * BYTES_BF16 * width / split, act))
    if layout.ffn == "tp" and not layout.fused_permute:
        # Megatron-Core's all-gather dispatcher (unfused permutation) keeps the int64 index expanded to
        # [b s k, h] for its gather / scatter backward
        saved.append(Saved("permute_index", k * split * BYTES_INDEX * h, moe))
    if model.moe_latent_size:  # fc2_latent_proj keeps its input, the combine's output (fc1's input is the router's)
        saved.append(Saved("latent_up_input", g * model.moe_latent_size, moe))
    if model.shared_ffn_size:
        shared = dense_mlp_saved(model.shared_ffn_size, model, layout, Module.SHARED_EXPERTS, "shared")
        if layout.gemm_dtype != "fp8":  # in BF16 fc1 reads the router's input, already counted
            shared = shared[1:]
        saved += shared
    return saved


def dropout_mask(model: ModelSpec, name: str) -> list[Saved]:
    """The bool mask a block's bias-dropout-add keeps under hidden dropout (workloads/recipes/residual.py), between
    the TP blocks as the residual stream is."""
    return (
        [Saved(f"{name}_dropout_mask", MASK_BYTES * model.hidden_size, between_tp_blocks=True)]
        if model.hidden_dropout
        else []
    )


def layer_saved(model: ModelSpec, layout: LayoutSpec, dense: bool, block: str = "", seq_len: int = 0) -> list[Saved]:
    """Every tensor one layer (a hybrid model's ``block`` alone) keeps for backward, per local token, at ``seq_len``
    tokens a sequence (what unfused attention's scores grow with)."""
    if block == "mamba":
        return [*mamba_saved(model, layout), *dropout_mask(model, "mamba")]
    if block == "gdn":
        return [*gdn_saved(model, layout), *dropout_mask(model, "gdn")]
    attention = (
        [*attention_saved(model, layout, seq_len), *dropout_mask(model, "attn")] if block in ("", "attention") else []
    )
    if block == "attention":
        return attention
    ffn_norm = Saved("ffn_norm_input", BYTES_BF16 * model.hidden_size, between_tp_blocks=True)
    if dense:
        ffn = dense_mlp_saved(model.dense_ffn_size, model, layout, Module.MLP, "mlp")
    else:
        ffn = moe_saved(model, layout)
    # the n streams before each block: the layer's input kept, the one between its blocks re-made under
    # --recompute-modules mhc (Megatron-Core's output-discarding checkpoint of the merge, hyper_connection.py)
    stream = BYTES_BF16 * model.residual_streams * model.hidden_size
    streams = [Saved("mhc_layer_input", stream), Saved("mhc_block_streams", stream, Module.MHC)]
    mask = dropout_mask(model, "mlp")
    return [*attention, ffn_norm, *ffn, *mask, *(streams if model.residual_streams > 1 else [])]


def mamba_saved(model: ModelSpec, layout: LayoutSpec) -> list[Saved]:
    """A Mamba-2 layer's saved tensors per local token (workloads/recipes/mamba.py): its norm's input and in_proj's
    (TE's LayerNorm linear), in_proj's output z x B C dt (mamba_ssm's mamba_split_conv1d_scan_combined keeps it and
    recomputes the conv in backward), the scan's output y and the gated norm's FP32 rstd per group, and out_proj's
    input."""
    h, g = model.hidden_size, gemm_input_bytes(layout)
    inner = model.mamba_inner
    return [
        Saved("mamba_norm_input", BYTES_BF16 * h, between_tp_blocks=True),
        Saved("mamba_in_proj_input", g * h, between_tp_blocks=True),
        Saved("mamba_in_proj_output", BYTES_BF16 * model.mamba_in_proj_width),
        Saved("mamba_scan_output", BYTES_BF16 * inner),
        Saved("mamba_norm_rstd", BYTES_FP32 * model.mamba_groups),
        Saved("mamba_out_proj_input", g * inner),
    ]


def local_tokens(layout: LayoutSpec, seq_len: int) -> float:
    """Tokens of one micro-batch each GPU keeps activations for: b s / (t cp) (sequence parallelism, CP)."""
    return layout.micro_batch * seq_len / (_tp(layout) * layout.cp)


def megatron_layer_bytes(model: ModelSpec, layout: LayoutSpec, seq_len: int, dense: bool, block: str = "") -> float:
    """Bytes one layer keeps per GPU per micro-batch under the layout's recomputation.

    Full recomputation keeps the layer's input (Korthikanti Sec. 4.2: 2 s b h / t per layer); selective
    recomputation drops what its modules re-run (Megatron-Core ``CheckpointWithoutOutput``). Without sequence
    parallelism the tensors between the TP blocks, the layer's input among them, are t times larger.
    """
    tokens = local_tokens(layout, seq_len)
    whole = _tp(layout) // layout.sequence_shards  # t without sequence parallelism, else 1
    if layout.recompute == "full":
        return tokens * whole * BYTES_BF16 * model.hidden_size
    modules = frozenset(Module(name) for name in layout.recompute_modules)
    kept = [s for s in layer_saved(model, layout, dense, block, seq_len) if not s.module.rerun_by(modules)]
    kept = [s for s in kept if not offloaded(s, layout, tokens * (whole if s.between_tp_blocks else 1))]
    return tokens * sum(s.bytes_per_token * (whole if s.between_tp_blocks else 1) for s in kept)


# The saved tensors each fine-grained offload module takes to host memory: its input (Megatron-LM
# docs/user-guide/features/fine_grained_activation_offloading.md, "Offloadable Modules"; fused_group_mlp the fused
# grouped MLP's saved inputs); GEMM inputs are counted in elements at the saved GEMM input's bytes, the rest BF16.
OFFLOADED = {
    "attn_norm": ("attn_norm_input",),
    "qkv_linear": ("qkv_input", "down_proj_inputs_fp8", "attn_norm_output"),
    "core_attn": ("q_k_v",),
    "attn_proj": ("attn_out", "attn_out_e5m6", "out_proj_input_fp8"),
    "mlp_norm": ("ffn_norm_input",),
    "expert_fc1": ("expert_fc1_input",),
    "moe_act": ("expert_fc1_output",),
    "fused_group_mlp": ("expert_fc1_input", "expert_fc1_output", "expert_fc2_input"),
}
_GEMM_INPUTS = ("qkv_input", "down_proj_inputs_fp8", "out_proj_input_fp8", "expert_fc1_input", "expert_fc2_input")


def offloaded(saved: Saved, layout: LayoutSpec, tokens: float) -> bool:
    """Whether ``saved`` (``tokens`` rows of it per micro-batch) goes to host memory under the layout's fine-grained
    activation offloading (workloads/specs/memory_options.py): named by an offload module, and at least
    offload_min_elements elements."""
    if not any(saved.name in OFFLOADED[module] for module in layout.offload_modules):
        return False
    element_bytes = gemm_input_bytes(layout) if saved.name in _GEMM_INPUTS else BYTES_BF16
    return tokens * saved.bytes_per_token / element_bytes >= layout.offload_min_elements


def _tp(layout: LayoutSpec) -> int:
    return layout.intra_size


def gdn_saved(model: ModelSpec, layout: LayoutSpec) -> list[Saved]:
    """A Gated DeltaNet layer's saved tensors per local token (workloads/recipes/mamba.py gdn_recipe): its norm's and
    in_proj's inputs, in_proj's output (the conv's input, the gate z, beta and the decay inputs), the conv's output,
    the prepared q, k and v the kernel reads (L2-normed, contiguous) with its FP32 decay and beta per value head,
    the recurrence's output, the gated norm's FP32 rstd per head and out_proj's input. Taken as autograd keeps
    each op's inputs (megatron/core/ssm/gated_delta_net/gdn.py at d98e8a64); FLA's kernel recomputes its chunk
    states in backward (chunk_gated_delta_rule_bwd)."""
    h, g = model.hidden_size, gemm_input_bytes(layout)
    qk, v = gdn_widths(model)
    heads = model.gdn_value_heads
    return [
        Saved("gdn_norm_input", BYTES_BF16 * h, between_tp_blocks=True),
        Saved("gdn_in_proj_input", g * h, between_tp_blocks=True),
        Saved("gdn_in_proj_output", BYTES_BF16 * (2 * qk + 2 * v + 2 * heads)),
        Saved("gdn_conv_output", BYTES_BF16 * (2 * qk + v)),
        Saved("gdn_kernel_inputs", BYTES_BF16 * (2 * qk + v) + BYTES_FP32 * 2 * heads),
        Saved("gdn_rule_output", BYTES_BF16 * v),
        Saved("gdn_norm_rstd", BYTES_FP32 * heads),
        Saved("gdn_out_proj_input", g * v),
    ]


# Bytes per logit the loss keeps from the LM head's forward to its backward. TE's Triton cross entropy (Megatron-Core
# --cross-entropy-fusion-impl te) writes the gradient into the BF16 logits in place and keeps them
# (transformer_engine/pytorch/triton/cross_entropy.py at TE 4220403); Megatron-Core's own vocab-parallel loss copies
# the logits to FP32 (``vocab_parallel_logits.float()``), exponentiates the copy in place and saves it, the BF16
# logits living beside it while the copy is made (megatron/core/tensor_parallel/cross_entropy.py at NVIDIA/Megatron-LM
# d98e8a64): 4 + 2 bytes. Stacks whose loss is not published (MegaScale-MoE's, DeepSeek-V3's) are charged the BF16
# logits alone, what any head that materializes them holds. Measured: Megatron-Bridge's recompute study of Nemotron 3
# Nano (16 H100, sequence 8,192, vocabulary 131,072; skills/nemo-mbridge-perf-activation-recompute/SKILL.md at
# Megatron-Bridge 067f987d) OOMed where "the output projection still needed 2 GiB": 8,192 x 131,072 BF16 logits.
LOGIT_BYTES_TE = BYTES_BF16
LOGIT_BYTES_UNFUSED = BYTES_FP32 + BYTES_BF16
# A multi-token prediction depth's projection keeps the two RMSNorm inputs (the shifted tokens' embedding and the
# previous depth's hidden state) and eh_proj's input, their 2h concatenation (DeepSeek-V3 Sec. 2.2;
# megatron/core/transformer/multi_token_prediction.py at d98e8a64): 4h BF16 elements per token.
MTP_PROJECTION_ELEMENTS_PER_HIDDEN = 4


def logits_bytes(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> float:
    """The logits the head and each multi-token prediction depth keep per GPU for one micro-batch, from the head's
    forward to its backward (vocabulary-parallel over t: b s / cp tokens x V / t each)."""
    logits = local_tokens(layout, seq_len) * model.vocab_size
    megatron_loss = te_layers(layout) and layout.cross_entropy != "te"
    per_logit = LOGIT_BYTES_UNFUSED if megatron_loss else LOGIT_BYTES_TE
    return (1 + model.mtp_layers) * logits * per_logit


def mtp_bytes(model: ModelSpec, layout: LayoutSpec, seq_len: int, mtp_layer_bytes: float) -> float:
    """What the multi-token prediction depths keep per GPU per micro-batch beside their logits: each depth's projection
    inputs and its layer's activations (``mtp_layer_bytes``: one depth's)."""
    projection = MTP_PROJECTION_ELEMENTS_PER_HIDDEN * model.hidden_size * BYTES_BF16 * local_tokens(layout, seq_len)
    return model.mtp_layers * (projection + mtp_layer_bytes)
