"""A model's fields beyond the paper's: the checks ModelSpec.__post_init__ runs on them (attention kinds, dense layers,
hybrid patterns, DeepSeek-V4's attention, DSA) and the attention weights MLA (with DSA's indexer) and DeepSeek-V4 imply
(ModelSpec.attention_params). They read a ModelSpec's fields only (typed Any: workloads/specs/models.py imports this
module)."""

from __future__ import annotations

from typing import Any

from topologies.errors import ConfigError

FFN_ACTIVATIONS = ("swiglu", "gelu", "squared_relu", "relu")
# --hybrid-override-pattern's symbols moesim simulates, and the block each names (LayerKind.block)
HYBRID_BLOCKS = {"M": "mamba", "G": "gdn", "*": "attention", "-": "mlp", "E": "moe"}


def check_extensions(model: Any) -> None:
    """Validate the beyond-the-paper fields: MLA ranks, DeepSeek-V4's and DSA's sizes, mHC, dense layers."""
    if model.attention not in ("gqa", "mla", "dsv4"):
        raise ConfigError("model.attention", "must be gqa, mla or dsv4")
    if model.attention == "dsv4":
        _check_dsv4(model)
    if model.index_topk and model.attention == "mla" and min(model.index_heads, model.index_head_dim) <= 0:
        raise ConfigError("model.index_heads", "index_heads and index_head_dim must be positive with index_topk (DSA)")
    if model.ffn_activation not in FFN_ACTIVATIONS:
        raise ConfigError("model.ffn_activation", f"must be one of {', '.join(FFN_ACTIVATIONS)}")
    for name in ("hidden_dropout", "attention_dropout"):
        if not 0 <= getattr(model, name) < 1:
            raise ConfigError(f"model.{name}", f"a dropout probability must be in [0, 1), got {getattr(model, name)}")
    if model.hybrid_pattern:
        _check_hybrid(model)
        if model.residual_streams > 1:
            raise ConfigError("model.residual_streams", "mHC is simulated around attention and FFN blocks, not Mamba")
    if model.attention == "mla":
        for name in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if getattr(model, name) <= 0:
                raise ConfigError(f"model.{name}", "must be positive for MLA attention")
    dense_only = model.num_experts == 0
    if model.num_dense_layers >= model.num_layers and not dense_only:
        raise ConfigError("model.num_dense_layers", f"must be < num_layers={model.num_layers} (or num_experts 0)")
    has_dense = dense_only or model.num_dense_layers or model.mlp_only_layers
    if has_dense and model.dense_ffn_size <= 0:
        raise ConfigError("model.dense_ffn_size", "must be positive when the model has dense layers")
    if not dense_only:
        for name in ("top_k", "expert_ffn_size"):
            if getattr(model, name) <= 0:
                raise ConfigError(f"model.{name}", "must be positive for a model with experts (num_experts > 0)")
    for name in ("window_layers", "mlp_only_layers"):
        outside = [i for i in getattr(model, name) if i >= model.num_layers]
        if outside:
            raise ConfigError(f"model.{name}", f"layer {outside[0]} is beyond num_layers={model.num_layers}")
    if model.window_layers and model.sliding_window <= 0:
        raise ConfigError("model.sliding_window", "must be positive when window_layers are given")


def _check_dsv4(model: Any) -> None:
    """DeepSeek-V4's attention: its widths given, one shared key-value head, compressions it has kernels for."""
    for name in ("q_lora_rank", "o_lora_rank", "o_groups", "kv_channels", "qk_rope_head_dim", "sliding_window"):
        if getattr(model, name) <= 0:
            raise ConfigError(f"model.{name}", "must be positive for DeepSeek-V4's attention (attention dsv4)")
    if model.num_kv_heads != 1:
        raise ConfigError("model.num_kv_heads", "must be 1 for DeepSeek-V4's attention (one shared key-value head)")
    if model.num_heads % model.o_groups:
        raise ConfigError("model.o_groups", f"must divide num_heads={model.num_heads}")
    unknown = sorted(set(model.compress_ratios) - {0, 4, 128})
    if unknown:
        raise ConfigError("model.compress_ratios", f"{unknown[0]} is not 0, 4 or 128 (DeepSeek-V4's window, CSA, HCA)")
    if 4 in model.compress_ratios and min(model.index_heads, model.index_head_dim, model.index_topk) <= 0:
        raise ConfigError("model.index_topk", "index_heads, index_head_dim and index_topk must be positive with CSA")


def _check_hybrid(model: Any) -> None:
    """A hybrid pattern: one known symbol per layer, each block's sizes given, no per-layer lists beside it."""
    pattern = model.hybrid_pattern
    unknown = sorted(set(pattern) - set(HYBRID_BLOCKS))
    if unknown:
        raise ConfigError(
            "model.hybrid_pattern",
            f"{unknown[0]!r} is not a block moesim simulates (M Mamba-2, G Gated DeltaNet, * attention, - MLP, E MoE; "
            "Megatron's D and + layers and pipeline separators | are not)",
        )
    if len(pattern) != model.num_layers:
        raise ConfigError("model.hybrid_pattern", f"has {len(pattern)} layers, num_layers is {model.num_layers}")
    if "G" in pattern and model.gdn_key_heads and model.gdn_value_heads % model.gdn_key_heads:
        raise ConfigError("model.gdn_value_heads", f"must be a multiple of gdn_key_heads={model.gdn_key_heads}")
    blocks = (("M", "mamba_heads"), ("G", "gdn_key_heads"), ("G", "gdn_value_heads"), ("E", "num_experts"))
    for symbol, name in (*blocks, ("-", "dense_ffn_size")):
        if symbol in pattern and getattr(model, name) <= 0:
            raise ConfigError(f"model.{name}", f"must be positive for a pattern with {HYBRID_BLOCKS[symbol]} layers")
    for name in ("num_dense_layers", "mlp_only_layers", "window_layers"):
        if getattr(model, name):
            raise ConfigError(f"model.{name}", "is not simulated beside hybrid_pattern (the pattern places each layer)")


def qk_head_dim(model: Any) -> int:
    """Query/key width per head: d_h + d_h^R."""
    return model.qk_nope_head_dim + model.qk_rope_head_dim


def mla_params(model: Any) -> int:
    """Weights of one MLA block (DeepSeek-V2 Eq. 12-19 and its HF modeling code), norms included."""
    h, heads, q_rank, kv_rank = model.hidden_size, model.num_heads, model.q_lora_rank, model.kv_lora_rank
    q_width = heads * qk_head_dim(model)
    query = h * q_rank + q_rank + q_rank * q_width if q_rank else h * q_width  # W^DQ, norm, W^UQ/W^QR
    kv = h * (kv_rank + model.qk_rope_head_dim) + kv_rank  # W^DKV and W^KR, latent norm
    kv += kv_rank * heads * (model.qk_nope_head_dim + model.v_head_dim)  # W^UK, W^UV
    out = heads * model.v_head_dim * h  # W^O
    # DSA's indexer (Megatron-Core DSAIndexer: linear_wq_b, linear_wk with its LayerNorm, linear_weights_proj)
    di, indexer_heads = model.index_head_dim, model.index_heads
    indexer = (q_rank or h) * indexer_heads * di + h * di + 2 * di + h * indexer_heads if model.index_topk else 0
    return query + kv + out + indexer


def dsv4_params(model: Any) -> int:
    """Weights of one DeepSeek-V4 attention block, the mean over the layers (their compressors differ; every weight
    counted exactly in the sum; HF DeepseekV4 checkpoint shapes): wq_a, q_norm, wq_b; wkv and kv_norm (one head);
    wo_a (o_groups blocks, each heads / groups x head dim -> o_lora_rank) and wo_b; per layer, a compressor's wkv and
    wgate (2 x head dim each at ratio 4, whose windows overlap, 1 x at 128) and norm, and at ratio 4 the indexer's
    wq_b, weights_proj and its own compressor (overlapping, of index_head_dim)."""
    h, heads, d, q_rank = model.hidden_size, model.num_heads, model.head_dim, model.q_lora_rank
    shared = h * q_rank + q_rank + q_rank * heads * d + h * d + d
    shared += heads * d * model.o_lora_rank + model.o_groups * model.o_lora_rank * h
    di = model.index_head_dim
    per_ratio = {
        0: 0,
        128: 2 * h * d + d,
        4: 2 * h * 2 * d + d + q_rank * model.index_heads * di + h * model.index_heads + 2 * h * 2 * di + di,
    }
    ratios = [model.compress_ratio(layer) for layer in range(model.num_layers)]
    return shared + round(sum(per_ratio[r] for r in ratios) / len(ratios))


def gdn_widths(model: Any) -> tuple[int, int]:
    """A Gated DeltaNet mixer's query / key width (each) and value width: heads x head dim."""
    return model.gdn_key_heads * model.gdn_key_head_dim, model.gdn_value_heads * model.gdn_value_head_dim


def gdn_in_proj_width(model: Any) -> int:
    """in_proj's output: q, k, v, the output gate z (as wide as v), and per value head the beta and decay inputs."""
    qk, v = gdn_widths(model)
    return 2 * qk + 2 * v + 2 * model.gdn_value_heads


def gdn_params(model: Any) -> int:
    """One Gated DeltaNet mixer (HF modeling_qwen3_next Qwen3NextGatedDeltaNet): in_proj_qkvz and in_proj_ba, the
    depthwise conv over q, k and v (no bias), dt_bias and A_log per value head, the gated norm, out_proj."""
    qk, v = gdn_widths(model)
    h = model.hidden_size
    conv = (2 * qk + v) * model.gdn_conv_kernel
    return h * gdn_in_proj_width(model) + conv + 2 * model.gdn_value_heads + model.gdn_value_head_dim + v * h


def paired_layers(model: Any) -> bool:
    """Whether a hybrid pattern is Megatron's GPT layers written as blocks, a mixer (Gated DeltaNet or attention)
    then an FFN each, as a Qwen3-Next config.json gives it (workloads/inputs/huggingface/hybrid.py): a layout or a layer count
    of that GPT form names half the blocks."""
    pattern = model.hybrid_pattern
    return "G" in pattern and all(pattern[i] in "G*" and pattern[i + 1] in "E-" for i in range(0, len(pattern), 2))
