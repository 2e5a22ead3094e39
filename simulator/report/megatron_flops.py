"""Megatron-LM's model FLOPs per step: the count behind its "throughput per GPU (TFLOP/s/GPU)" log line.

So that a simulated run can be compared with a Megatron-LM log line for line, this is the count Megatron
itself prints, not moesim's own (which counts capacity-padded expert GEMMs, see Report.mfu). Written from
``num_floating_point_operations`` (its ``transformer_flops`` branch) in megatron/training/training.py of
NVIDIA/Megatron-LM at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553, for unpacked (BSHD) batches:
every sequence is seq_len tokens, so sum(L) = b s and sum(L^2) = b s^2. What it counts:

- every GEMM 3 times (forward, data gradient, weight gradient) at 2 FLOPs per multiply-add;
- the FFNs: dense layers h x ffn_hidden_size, MoE layers top-k routed experts plus the shared experts,
  x3 GEMMs with SwiGLU (x2 without); the router, norms and activations are not counted;
- attention projections: Q, K, V (GQA: K and V of num_query_groups x kv_channels) and the output;
  MLA: the q / kv LoRA down and up projections (+1 per rank for the norms), the decoupled RoPE key and
  the output; the core attention QK^T and softmax(QK^T)V with the causal mask (half of s^2);
- multi-token prediction: each MTP module is one more transformer layer (MoE if the last layer is), its
  norms (3h) and h x 2h projection, and one more logit GEMM;
- the logits over the padded vocabulary (a multiple of 128 x TP, megatron/training/vocab_utils.py).

A hybrid model (``hybrid_flops`` of the same file, ``is_hybrid_model``) is counted per block: attention (its
projections and 2 s^2 h p core FLOPs), plain or gated MLPs, MoE layers, Mamba layers as Megatron writes them (in_proj
and out_proj at d_in = 2 h whatever the heads, and 7 d_in N scan FLOPs per token), Gated DeltaNet layers
(``gdn_layer_flops``: in_proj, the conv, 4 d_v^2 per value head and token for the delta rule, out_proj), and the
logits.

A latent MoE (moe_latent_size) counts its routed experts at the latent width and its up and down projections.

DeepSeek-V4's attention has no branch in that count at d98e8a64 (its support is in a later Megatron-Core): counted
here as Megatron counts MLA, every projection weight (workloads/specs/models.py dsv4_params) three GEMM passes and the
core over the (query, key) pairs the layer attends (workloads/recipes/dsv4_attention.py attended_pairs), the mean over
the layers and MTP modules.

Megatron's count has no term for the attention output gate's half of the query projection; nor has this one.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.recipes.dsv4_attention import attended_pairs
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

GEMM_PASSES = 3  # forward, backward data gradient, backward weight gradient
FMA_FLOPS = 2  # one multiply-add of an m x n by n x k GEMM: 2 m n k FLOPs
FROZEN_PASSES = 2 / GEMM_PASSES  # a frozen weight's GEMMs: forward and data gradient only (LoRA)
VOCAB_DIVISOR = 128  # Megatron-LM --make-vocab-size-divisible-by default (megatron/training/arguments.py)


@dataclass(frozen=True)
class MegatronArgs:
    """The Megatron-LM arguments the FLOP count reads, named as on its command line (0 = the flag unset)."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_query_groups: int  # = num_attention_heads without --group-query-attention
    kv_channels: int  # width of one head
    ffn_hidden_size: int  # the dense layers' FFN width
    moe_ffn_hidden_size: int
    moe_shared_expert_intermediate_size: int  # total width of the shared experts
    moe_router_topk: int
    num_moe_layers: int  # layers with an MoE FFN (from --moe-layer-freq)
    last_layer_is_moe: bool  # MTP modules copy the last layer's FFN kind
    padded_vocab_size: int
    swiglu: bool = True
    mtp_num_layers: int = 0
    multi_latent_attention: bool = False
    q_lora_rank: int = 0  # 0: no query compression (--q-lora-rank unset)
    kv_lora_rank: int = 0
    qk_head_dim: int = 0
    qk_pos_emb_head_dim: int = 0
    v_head_dim: int = 0
    moe_latent_size: int = 0  # --moe-latent-size: routed experts at this width, with an up and a down projection
    # a hybrid model's blocks (--hybrid-override-pattern; 0 attention layers and a plain transformer otherwise)
    hybrid: bool = False
    num_attention_layers: int = 0
    num_mamba_layers: int = 0
    num_mlp_layers: int = 0
    mamba_state_dim: int = 0
    mamba_num_groups: int = 0
    mamba_num_heads: int = 0
    num_gdn_layers: int = 0
    gdn: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)  # qk heads, v heads, qk head dim, v head dim, conv width
    # DeepSeek-V4's attention: (FLOPs per token of its projections, of its core per unit of b s^2), per layer
    sparse_attention: tuple[float, float] | None = None


def padded_vocab_size(vocab_size: int, tensor_parallel: int) -> int:
    """Megatron-LM's vocabulary padded to a multiple of 128 x TP (vocab_utils._calculate_padded_vocab_size)."""
    multiple = VOCAB_DIVISOR * tensor_parallel
    return -(-vocab_size // multiple) * multiple


def megatron_args(model: ModelSpec, layout: LayoutSpec, seq_len: int = 0) -> MegatronArgs:
    """The Megatron-LM arguments of a moesim model (--swiglu where its FFNs are gated; leading layers are the dense
    ones); ``seq_len``: the sequence DeepSeek-V4's attention is counted over (its pairs are not s^2 / 2)."""
    tensor_parallel = layout.intra_size if layout.attention == "tp" else 1  # Ulysses SP keeps the whole vocabulary
    return MegatronArgs(
        num_layers=model.num_layers,
        hidden_size=model.hidden_size,
        num_attention_heads=model.num_heads,
        num_query_groups=model.num_kv_heads,
        kv_channels=model.head_dim,
        ffn_hidden_size=model.dense_ffn_size,
        moe_ffn_hidden_size=model.expert_ffn_size,
        moe_shared_expert_intermediate_size=model.shared_ffn_size,
        moe_router_topk=model.top_k,
        num_moe_layers=model.moe_layers,
        last_layer_is_moe=not model.layer_kind(model.num_layers - 1).dense,
        padded_vocab_size=padded_vocab_size(model.vocab_size, tensor_parallel),
        swiglu=model.gated_ffn,
        multi_latent_attention=model.attention == "mla",
        mtp_num_layers=model.mtp_layers,
        qk_head_dim=model.qk_nope_head_dim,
        qk_pos_emb_head_dim=model.qk_rope_head_dim,
        **{name: getattr(model, name) for name in ("q_lora_rank", "kv_lora_rank", "v_head_dim", "moe_latent_size")},
        **(_hybrid_args(model) if model.hybrid_pattern else {}),
        sparse_attention=_sparse_attention(model, seq_len) if model.attention == "dsv4" else None,
    )


def _sparse_attention(model: ModelSpec, seq_len: int) -> tuple[float, float]:
    """DeepSeek-V4's attention terms: its projection weights, and its core's FLOPs over s^2 (mean of its layers)."""
    if seq_len <= 0:
        raise ValueError("DeepSeek-V4's attention FLOPs depend on the sequence: pass megatron_args its seq_len")
    passes = GEMM_PASSES * FMA_FLOPS
    layers = range(model.num_layers + model.mtp_layers)
    pairs = sum(attended_pairs(model, seq_len, model.compress_ratio(i)) for i in layers) / len(layers)
    return passes * model.attention_params, passes * pairs / seq_len**2 * model.num_heads * 2 * model.head_dim


def _hybrid_args(model: ModelSpec) -> dict:
    """A hybrid model's block counts and Mamba and GDN sizes (MegatronArgs fields)."""
    return {
        "hybrid": True,
        "num_attention_layers": model.blocks("attention"),
        "num_mamba_layers": model.blocks("mamba"),
        "num_mlp_layers": model.blocks("mlp"),
        "mamba_state_dim": model.mamba_state_dim,
        "mamba_num_groups": model.mamba_groups,
        "mamba_num_heads": model.mamba_heads,
        "num_gdn_layers": model.blocks("gdn"),
        "gdn": (
            model.gdn_key_heads,
            model.gdn_value_heads,
            model.gdn_key_head_dim,
            model.gdn_value_head_dim,
            model.gdn_conv_kernel,
        ),
    }


def _attention_terms(args: MegatronArgs) -> tuple[float, float]:
    """Per layer: (FLOPs per token of the projections, FLOPs per (token x sequence length) of core attention)."""
    if args.sparse_attention is not None:
        return args.sparse_attention
    passes = GEMM_PASSES * FMA_FLOPS
    h, heads = args.hidden_size, args.num_attention_heads
    if args.multi_latent_attention:
        qk_width = args.qk_head_dim + args.qk_pos_emb_head_dim
        if args.q_lora_rank:
            q_term = args.q_lora_rank * (h + heads * qk_width + 1)
        else:
            q_term = h * heads * qk_width
        kv_term = args.kv_lora_rank * (h + heads * (args.qk_head_dim + args.v_head_dim) + 1)
        projections = q_term + kv_term + h * args.qk_pos_emb_head_dim + heads * args.v_head_dim * h
        core = heads * qk_width / 2 + heads * args.v_head_dim / 2  # causal: half of QK^T and of AV
        return passes * projections, passes * core
    query = args.kv_channels * heads
    key_value = args.kv_channels * args.num_query_groups
    projections = h * (query + 2 * key_value) + query * h
    return passes * projections, passes * query / 2 * 2  # causal half of QK^T, and (QK^T)V


def megatron_flops(args: MegatronArgs, batch_size: int, seq_length: int, frozen: bool = False) -> float:
    """FLOPs of one global batch of batch_size sequences of seq_length tokens, as Megatron-LM counts them; ``frozen``
    (LoRA: workloads/specs/peft.py): as Megatron-Bridge counts a LoRA step, the weights' GEMMs at two passes of three
    (forward and input gradient, no weight gradient) and attention's core whole (src/megatron/bridge/training/utils/
    flop_utils.py at 067f987d: model_flops_frozen x 2/3 + model_flops_unfrozen)."""
    if args.hybrid:
        return _hybrid_flops(args, batch_size, seq_length)
    passes = GEMM_PASSES * FMA_FLOPS
    ffn_gemms = 3 if args.swiglu else 2
    h, mtp = args.hidden_size, args.mtp_num_layers
    moe_layers = args.num_moe_layers + (mtp if args.last_layer_is_moe else 0)
    dense_layers = args.num_layers - args.num_moe_layers + (0 if args.last_layer_is_moe else mtp)
    attention_layers = args.num_layers + mtp
    routed = ffn_gemms * args.moe_ffn_hidden_size * args.moe_router_topk
    if args.moe_latent_size:  # the routed experts at the latent width, and its up and down projections
        routed = routed * args.moe_latent_size / h + 2 * args.moe_latent_size
    dense_and_shared = ffn_gemms * (
        args.ffn_hidden_size * dense_layers + args.moe_shared_expert_intermediate_size * moe_layers
    )
    ffn = passes * h * (dense_and_shared + routed * moe_layers)
    projections, core = _attention_terms(args)
    mtp_extra = passes * mtp * (3 * h + 2 * h * h)
    logits = passes * h * args.padded_vocab_size * (mtp + 1)
    tokens = batch_size * seq_length
    per_token = (ffn + projections * attention_layers + mtp_extra + logits) * (FROZEN_PASSES if frozen else 1.0)
    return tokens * per_token + batch_size * seq_length**2 * core * attention_layers


def _hybrid_flops(args: MegatronArgs, batch_size: int, seq_length: int) -> float:
    """Megatron-LM's ``hybrid_flops``: forward FLOPs per block kind, times 3 (forward and the two backward GEMMs)."""
    tokens, h = batch_size * seq_length, args.hidden_size
    ffn_scale = 1.5 if args.swiglu else 1.0
    p = args.kv_channels * args.num_attention_heads / h
    attention = 4 * tokens * h * p * (h + h * args.num_query_groups / args.num_attention_heads)
    attention += 2 * batch_size * seq_length**2 * h * p
    mlp = 4 * ffn_scale * tokens * h * args.ffn_hidden_size
    latent = args.moe_latent_size
    routed = args.moe_ffn_hidden_size * args.moe_router_topk * (latent or h)  # routed experts at the latent width
    moe = 4 * ffn_scale * tokens * (routed + h * args.moe_shared_expert_intermediate_size) + 4 * tokens * h * latent
    d_in = 2 * h  # Megatron's count, whatever the heads (mamba_layer_flops)
    in_proj = 2 * d_in + 2 * args.mamba_num_groups * args.mamba_state_dim + args.mamba_num_heads
    mamba = 2 * tokens * h * in_proj + 7 * tokens * d_in * args.mamba_state_dim + 2 * tokens * d_in * h
    qk_heads, v_heads, qk_dim, v_dim, conv = args.gdn  # gdn_layer_flops: in_proj, conv1d, the delta rule, out_proj
    qk, v = qk_heads * qk_dim, v_heads * v_dim
    gdn = 2 * tokens * (h * (2 * qk + 2 * v + 2 * v_heads) + conv * (2 * qk + v) + v_heads * v_dim**2 * 4 + h * v)
    logits = 2 * tokens * h * args.padded_vocab_size * (1 + args.mtp_num_layers)
    # Megatron counts each MTP depth's "*E" layers too (hybrid_layer_allocation.get_hybrid_layer_counts)
    mtp = args.mtp_num_layers
    forward = (
        (args.num_attention_layers + mtp) * attention
        + args.num_mlp_layers * mlp
        + (args.num_moe_layers + mtp) * moe
        + args.num_mamba_layers * mamba
        + args.num_gdn_layers * gdn
        + logits
    )
    return GEMM_PASSES * forward
