"""A Hugging Face Transformers ``config.json`` as a ModelSpec, for the model types that train as MoE today
and the dense ones beside them.

Only keys that change the work of a training step are read (layers, widths, heads, experts, the MoE layer
pattern, MLA ranks, sliding windows, vocabulary, tied embeddings, multi-token prediction); a required key
that is missing, or an unsupported ``model_type``, is a ConfigError naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from topologies.errors import ConfigError, short_repr
from workloads.inputs.bounded_read import read_bounded
from workloads.inputs.huggingface.classic import ALIASES, FAMILIES, canonical, classic_fields
from workloads.inputs.huggingface.hybrid import nemotron_h, qwen3_next
from workloads.inputs.huggingface.names import JSON_SUFFIX, is_hf_config_path
from workloads.specs.limits import check_limit
from workloads.specs.models import ModelSpec


class _Config:
    """Typed reads of one config mapping; errors name the file and the key."""

    def __init__(self, data: dict, origin: str) -> None:
        self.data, self.origin = data, origin

    def fail(self, key: str, rule: str) -> ConfigError:
        return ConfigError(f"model.{key}", f"{rule} ({self.origin})")

    def int(self, key: str, *fallbacks: str, default: int | None = None) -> int:
        """The integer under ``key`` (or the first fallback key present); ``default`` if none is present or null."""
        for name in (key, *fallbacks):
            value = self.data.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.fail(name, f"must be an integer, got {value!r}")
            return value
        if default is None:
            raise self.fail(key, "missing key in config.json")
        return default

    def positive(self, key: str, default: int) -> int:
        """An integer >= 1 (a layer frequency): a zero or negative one names the key."""
        value = self.int(key, default=default)
        if value < 1:
            raise self.fail(key, f"must be >= 1, got {value}")
        return value

    def probability(self, key: str) -> float:
        """A dropout probability in [0, 1); 0 where the key is absent or null."""
        value = self.data.get(key) or 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise self.fail(key, f"must be a probability in [0, 1), got {value!r}")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def int_list(self, key: str) -> tuple[int, ...]:
        value = self.data.get(key) or []
        if not isinstance(value, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in value):
            raise self.fail(key, f"must be a list of integers, got {value!r}")
        return tuple(value)

    def layer_types(self, layers: int) -> tuple[int, ...]:
        """Indices of the sliding-window layers from ``layer_types`` (GPT-OSS, newer Qwen configs)."""
        types = self.data.get("layer_types")
        if types is None:
            return ()
        if not isinstance(types, list) or len(types) != layers:
            raise self.fail("layer_types", f"must list one type for each of the {layers} layers")
        unknown = sorted({t for t in types if t not in ("full_attention", "sliding_attention")})
        if unknown:
            raise self.fail("layer_types", f"unknown layer type {unknown[0]!r}")
        return tuple(i for i, t in enumerate(types) if t == "sliding_attention")


def _common(c: _Config, name: str) -> dict[str, Any]:
    """Fields every supported decoder shares: depth, widths, heads, vocabulary, embeddings, windows."""
    layers = c.int("num_hidden_layers")
    check_limit("model.num_layers", "layers", layers, "num_hidden_layers")  # before any per-layer list is built
    heads = c.int("num_attention_heads")
    fields: dict[str, Any] = {
        "name": name,
        "num_layers": layers,
        "hidden_size": c.int("hidden_size"),
        "num_heads": heads,
        "num_kv_heads": c.int("num_key_value_heads", default=heads),
        "vocab_size": c.int("vocab_size"),
        "tied_embeddings": c.bool("tie_word_embeddings", False),
        "kv_channels": c.int("head_dim", default=0),
        "rope": "rope_theta" in c.data,  # every supported family rotates q and k by rope_theta's frequencies
        "hidden_dropout": c.probability("hidden_dropout"),
        "attention_dropout": c.probability("attention_dropout"),
    }
    window = c.int("sliding_window", default=0)
    if "layer_types" in c.data:  # GPT-OSS and newer configs name each layer's attention
        sliding = c.layer_types(layers)
    elif "use_sliding_window" in c.data:  # Qwen2-style: the layers from max_window_layers on, if enabled
        on = c.bool("use_sliding_window", False)
        sliding = tuple(range(c.int("max_window_layers", default=0), layers)) if on else ()
    else:  # Mistral-style: a window, when given, on every layer
        sliding = tuple(range(layers))
    if window and sliding:
        fields.update(sliding_window=window, window_layers=sliding)
    return fields


def _dense(c: _Config, name: str) -> dict[str, Any]:
    """llama, mistral, qwen2, qwen3: every layer a SwiGLU of intermediate_size; Qwen3 norms q and k per head
    (HF modeling_qwen3 Qwen3Attention q_norm, k_norm)."""
    return {
        **_common(c, name),
        "qk_layernorm": c.data.get("model_type") == "qwen3",
        "dense_ffn_size": c.int("intermediate_size"),
        "expert_ffn_size": 0,
        "num_experts": 0,
        "top_k": 0,
    }


def _nemotron(c: _Config, name: str) -> dict[str, Any]:
    """Nemotron-4 and Minitron (HF modeling_nemotron: NemotronMLP is up_proj, the activation, down_proj, no gate):
    every layer a plain MLP of intermediate_size with squared ReLU [hidden_act relu2]."""
    if c.data.get("hidden_act", "relu2") != "relu2":
        raise c.fail("hidden_act", f"a nemotron MLP runs relu2, got {short_repr(c.data.get('hidden_act'))}")
    return {**_dense(c, name), "ffn_activation": "squared_relu"}


def _classic(c: _Config, name: str) -> dict[str, Any]:
    """GPT-2, OPT, BLOOM, GPT-NeoX, Falcon, MPT, Gemma, Phi-3, StarCoder2, OLMo, Granite (classic.py): the family's
    keys renamed to the shared ones over its config class's defaults, then its MLP, KV heads and positions."""
    model_type = c.data["model_type"]
    renamed = _Config(canonical(model_type, c.data), c.origin)
    return classic_fields(renamed, model_type, _common(renamed, name))


def _nemotron_h(c: _Config, name: str) -> dict[str, Any]:
    """Nemotron-H and Nemotron 3 (workloads/inputs/huggingface/hybrid.py)."""
    return nemotron_h(c, _common(c, name))


def _qwen3_next(c: _Config, name: str) -> dict[str, Any]:
    """Qwen3-Next, Qwen3.5 / 3.6 (workloads/inputs/huggingface/hybrid.py), the text model of a multimodal config; layer_types
    names the mixers there, not sliding windows."""
    if c.data.get("model_type") in ("qwen3_5_moe", "qwen3_5") and "text_config" in c.data:
        text = c.data["text_config"]
        if not isinstance(text, dict):
            raise c.fail("text_config", "must hold the text model's config")
        c = _Config(text, c.origin)
    without_types = _Config({k: v for k, v in c.data.items() if k != "layer_types"}, c.origin)
    return qwen3_next(c, _common(without_types, name))


def _experts(c: _Config, name: str, experts_key: str, width_key: str) -> dict[str, Any]:
    return {
        **_common(c, name),
        "num_experts": c.int(experts_key),
        "top_k": c.int("num_experts_per_tok", "experts_per_token"),
        "expert_ffn_size": c.int(width_key),
    }


def _mixtral(c: _Config, name: str) -> dict[str, Any]:
    """Mixtral, GPT-OSS: every layer MoE, experts as wide as intermediate_size."""
    return _experts(c, name, "num_local_experts", "intermediate_size")


def _granite_shared(c: _Config, name: str) -> dict[str, Any]:
    """Granite MoE with a shared expert (HF GraniteMoeSharedConfig): Mixtral's keys and one shared MLP of
    shared_intermediate_size (0: none)."""
    fields, shared = _mixtral(c, name), c.int("shared_intermediate_size", default=0)
    return fields | ({"num_shared_experts": 1, "shared_expert_ffn_size": shared} if shared else {})


def _gpt_oss(c: _Config, name: str) -> dict[str, Any]:
    """GPT-OSS: Mixtral's layout plus biased experts (HF modeling_gpt_oss GptOssExperts), the clamp of its
    SwiGLU [swiglu_limit] and YaRN RoPE, which Megatron-Core applies unfused (ModelSpec.rope_unfused)."""
    fields = _mixtral(c, name)
    fields.update(expert_bias=True, expert_act_clamp=c.data.get("swiglu_limit", 0.0), rope_unfused=fields["rope"])
    return fields


def _qwen_moe(c: _Config, name: str) -> dict[str, Any]:
    """Qwen2-MoE / Qwen3-MoE: MoE on layers with (i + 1) % decoder_sparse_step == 0 outside mlp_only_layers;
    Qwen2-MoE adds one shared expert of shared_expert_intermediate_size (HF modeling_qwen2_moe)."""
    fields = _experts(c, name, "num_experts", "moe_intermediate_size")
    fields["qk_layernorm"] = c.data.get("model_type") == "qwen3_moe"  # HF Qwen3MoeAttention q_norm, k_norm
    step = c.positive("decoder_sparse_step", default=1)
    dense = sorted(set(c.int_list("mlp_only_layers")) | {i for i in range(fields["num_layers"]) if (i + 1) % step})
    if dense:
        fields.update(mlp_only_layers=tuple(dense), dense_ffn_size=c.int("intermediate_size"))
    shared = c.int("shared_expert_intermediate_size", default=0)
    if shared:
        fields.update(num_shared_experts=1, shared_expert_ffn_size=shared)
    return fields


def _olmoe(c: _Config, name: str) -> dict[str, Any]:
    return _experts(c, name, "num_experts", "intermediate_size")


def _deepseek(c: _Config, name: str) -> dict[str, Any]:
    """DeepSeek-V2 / V3 (and Kimi K2): MLA, first_k_dense_replace dense layers, then MoE every moe_layer_freq layers
    (HF modeling_deepseek: layer i >= k and i % freq == 0), shared experts, MTP modules (V3)."""
    fields = _experts(c, name, "n_routed_experts", "moe_intermediate_size")
    layers, first = fields["num_layers"], c.int("first_k_dense_replace", default=0)
    freq = c.positive("moe_layer_freq", default=1)
    later = tuple(i for i in range(first, layers) if i % freq)
    fields.update(
        attention="mla",
        kv_channels=0,
        q_lora_rank=c.int("q_lora_rank", default=0),
        kv_lora_rank=c.int("kv_lora_rank"),
        qk_rope_head_dim=c.int("qk_rope_head_dim"),
        qk_nope_head_dim=c.int("qk_nope_head_dim"),
        v_head_dim=c.int("v_head_dim"),
        num_dense_layers=first,
        mlp_only_layers=later,
        num_shared_experts=c.int("n_shared_experts", default=0),
        mtp_layers=c.int("num_nextn_predict_layers", default=0),
    )
    if first or later:
        fields["dense_ffn_size"] = c.int("intermediate_size")
    fields.update(_indexer(c))  # DeepSeek-V3.2 and GLM-5's sparse attention (DSA) on MLA, where given
    return fields


def _indexer(c: _Config) -> dict[str, Any]:
    """An indexer's sizes (DSA, DeepSeek-V4's CSA) [index_n_heads, index_head_dim, index_topk; GLM-5's
    index_topk_freq, index_skip_topk_offset]; 0 without one."""
    sizes = {"index_heads": "index_n_heads", "index_head_dim": "index_head_dim", "index_topk": "index_topk"}
    fields = {field: c.int(key, default=0) for field, key in sizes.items()}
    offset = c.int("index_skip_topk_offset", default=0)
    return fields | {"index_topk_freq": c.positive("index_topk_freq", 1), "index_skip_offset": offset}


def _deepseek_v4(c: _Config, name: str) -> dict[str, Any]:
    """DeepSeek-V4: its hybrid attention (workloads/recipes/dsv4_attention.py; compress_ratios lists the layers', then
    the MTP modules'), mHC [hc_mult, hc_sinkhorn_iters], MoE in every layer with shared experts, MTP. Its first
    num_hash_layers layers route by token id: timed with the learned router's gate GEMM (under 1% of their FLOPs)."""
    fields = _experts(c, name, "n_routed_experts", "moe_intermediate_size")
    fields.pop("window_layers", None)
    same = ("q_lora_rank", "qk_rope_head_dim", "o_lora_rank", "o_groups", "sliding_window")
    fields.update({key: c.int(key, default=0) for key in same} | _indexer(c))
    fields["residual_streams"] = c.int("hc_mult", default=0)
    fields.update(
        attention="dsv4",
        compress_ratios=c.int_list("compress_ratios"),
        sinkhorn_iterations=c.positive("hc_sinkhorn_iters", default=20),
        num_shared_experts=c.int("n_shared_experts", default=0),
        mtp_layers=c.int("num_nextn_predict_layers", default=0),
    )
    if len(fields["compress_ratios"]) < fields["num_layers"]:
        raise c.fail("compress_ratios", f"must list each of the {fields['num_layers']} layers")
    return fields


def _glm4_moe(c: _Config, name: str) -> dict[str, Any]:
    """GLM-4.5 and GLM-4.5-Air (HF modeling_glm4_moe): DeepSeek-V3's MoE pattern (first_k_dense_replace dense layers,
    then routed experts of moe_intermediate_size beside n_shared_experts shared ones) on GQA attention of head_dim,
    with per-head q/k RMSNorms when use_qk_norm is set and MTP modules (num_nextn_predict_layers). The q/k/v biases
    (attention_bias) and the partial RoPE (partial_rotary_factor 0.5) change a layer's work by well under 0.1%."""
    fields = _experts(c, name, "n_routed_experts", "moe_intermediate_size")
    first = c.int("first_k_dense_replace", default=0)
    fields.update(
        num_dense_layers=first,
        num_shared_experts=c.int("n_shared_experts", default=0),
        qk_layernorm=c.bool("use_qk_norm", False),
        mtp_layers=c.int("num_nextn_predict_layers", default=0),
    )
    if first:
        fields["dense_ffn_size"] = c.int("intermediate_size")
    return fields


def _minimax_m2(c: _Config, name: str) -> dict[str, Any]:
    """MiniMax-M2 (HF modeling_minimax_m2): every layer GQA attention of head_dim and num_local_experts routed experts
    of intermediate_size, no shared expert (shared_intermediate_size 0), q/k normed when use_qk_norm is set, and
    num_mtp_modules MTP modules when use_mtp is. Its partial RoPE (rotary_dim 64 of 128) changes a layer's work by
    well under 0.1%."""
    fields = _experts(c, name, "num_local_experts", "intermediate_size")
    if c.int("shared_intermediate_size", default=0):
        raise c.fail("shared_intermediate_size", "a MiniMax shared expert is not modelled; only 0 is read")
    fields.update(
        qk_layernorm=c.bool("use_qk_norm", False),
        mtp_layers=c.int("num_mtp_modules", default=0) if c.bool("use_mtp", False) else 0,
    )
    return fields


def _ernie4_5_moe(c: _Config, name: str) -> dict[str, Any]:
    """ERNIE 4.5 MoE (HF modeling_ernie4_5_moe): moe_num_experts experts of moe_intermediate_size, top moe_k, on
    the layers from moe_layer_start_index to moe_layer_end_index (null or -1: the last) whose (i + 1) is a multiple
    of moe_layer_interval; the others dense SwiGLUs of intermediate_size. moe_num_shared_experts shared experts
    run as one MLP of that many times moe_intermediate_size (the same work as that many experts)."""
    fields = _common(c, name)
    layers = fields["num_layers"]
    start, end = c.int("moe_layer_start_index", default=0), c.int("moe_layer_end_index", default=-1)
    end = layers - 1 if end < 0 else end
    interval = c.positive("moe_layer_interval", default=1)
    moe = {i for i in range(start, min(end, layers - 1) + 1) if (i + 1) % interval == 0}
    dense = tuple(i for i in range(layers) if i not in moe)
    fields.update(
        num_experts=c.int("moe_num_experts"),
        top_k=c.int("moe_k"),
        expert_ffn_size=c.int("moe_intermediate_size"),
        num_shared_experts=c.int("moe_num_shared_experts", default=0),
    )
    if dense:
        leading = next((i for i in range(layers) if i in moe), layers)
        fields.update(
            num_dense_layers=leading,
            mlp_only_layers=tuple(i for i in dense if i >= leading),
            dense_ffn_size=c.int("intermediate_size"),
        )
    return fields


def _llama4(c: _Config, name: str) -> dict[str, Any]:
    """Llama 4's text model (HF modeling_llama4, the text_config of a Llama4ForConditionalGeneration config, or a
    llama4_text config): MoE on the layers of moe_layers (default every interleave_moe_layer_step-th, counting from
    step - 1), each num_local_experts routed experts of intermediate_size and one shared expert as wide; the other
    layers dense SwiGLUs of intermediate_size_mlp; q/k normed when use_qk_norm is set (a weightless L2 norm).
    The chunked local attention of its RoPE layers (attention_chunk_size, 8,192) is simulated as full causal
    attention: exact for sequences up to one chunk, more attention work than the model does beyond it."""
    text = c.data.get("text_config")
    if c.data.get("model_type") == "llama4":
        if not isinstance(text, dict):
            raise c.fail("text_config", "a llama4 config.json must hold its text model under text_config")
        c = _Config(text, c.origin)
    fields = _common(c, name)
    layers, step = fields["num_layers"], c.positive("interleave_moe_layer_step", default=1)
    moe = set(c.int_list("moe_layers")) or set(range(step - 1, layers, step))
    dense = tuple(i for i in range(layers) if i not in moe)
    width = c.int("intermediate_size")
    fields.update(
        num_experts=c.int("num_local_experts"),
        top_k=c.int("num_experts_per_tok"),
        expert_ffn_size=width,
        num_shared_experts=1,
        qk_layernorm=c.bool("use_qk_norm", False),
    )
    if dense:
        fields.update(mlp_only_layers=dense, dense_ffn_size=c.int("intermediate_size_mlp"))
    return fields


READERS: dict[str, Callable[[_Config, str], dict[str, Any]]] = {
    "mixtral": _mixtral,
    "phimoe": _mixtral,  # Phi-3.5-MoE: Mixtral's keys (HF PhimoeConfig)
    "granitemoe": _mixtral,  # Granite 3 MoE: Mixtral's keys (HF GraniteMoeConfig); its multipliers change no work
    "granitemoeshared": _granite_shared,
    "gpt_oss": _gpt_oss,
    "qwen2_moe": _qwen_moe,
    "qwen3_moe": _qwen_moe,
    "olmoe": _olmoe,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    # Kimi K2 "reuses the DeepSeekV3CausalLM architecture"; model_type kimi_k2 only tells inference engines apart
    # (MoonshotAI/Kimi-K2 docs/deploy_guidance.md, "Others"): DeepSeek-V3's reader, at K2's 384 experts and 64 heads
    "kimi_k2": _deepseek,
    "deepseek_v4": _deepseek_v4,
    "deepseek_v32": _deepseek,  # DeepSeek-V3.2: V3's layers with DSA (index_topk)
    "glm_moe_dsa": _deepseek,  # GLM-5: MLA with DSA, DeepSeek-V3's MoE keys
    "glm4_moe": _glm4_moe,
    "ernie4_5_moe": _ernie4_5_moe,
    "llama4": _llama4,
    "minimax_m2": _minimax_m2,
    "llama4_text": _llama4,
    "llama": _dense,
    "mistral": _dense,  # Llama's layers; v0.1's sliding_window on every layer (_common)
    "qwen2": _dense,
    "qwen3": _dense,
    "nemotron": _nemotron,
    "nemotron_h": _nemotron_h,
    # the hybrids of Gated DeltaNet and gated attention; Qwen3.5 / 3.6 under text_config
    "qwen3_next": _qwen3_next,
    "qwen3_5_moe": _qwen3_next,
    "qwen3_5_moe_text": _qwen3_next,
    "qwen3_5": _qwen3_next,
    "qwen3_5_text": _qwen3_next,
    **dict.fromkeys((*FAMILIES, *ALIASES), _classic),
}


# Model types whose layers moesim cannot express: a refusal that says which layers, not "not supported".
NOT_EXPRESSED = {
    "jamba": "a hybrid Mamba-Transformer (attn_layer_period): Mamba layers are not modelled",
    "falcon_h1": "a hybrid with Mamba-2 heads beside attention in every layer: Mamba layers are not modelled",
    "kimi_linear": "Kimi Delta Attention linear-attention layers (linear_attn_config kda_layers) are not modelled",
}


def model_from_hf_dict(data: object, name: str, origin: str = "config.json") -> ModelSpec:
    """The ModelSpec of a parsed config.json mapping."""
    if not isinstance(data, dict):
        raise ConfigError("model", f"{origin} must hold a JSON object, got {type(data).__name__}")
    model_type = data.get("model_type")
    if isinstance(model_type, str) and model_type in NOT_EXPRESSED:
        raise ConfigError("model.model_type", f"{model_type}: {NOT_EXPRESSED[model_type]} ({origin})")
    if not isinstance(model_type, str) or model_type not in READERS:
        raise ConfigError(
            "model.model_type",
            f"{short_repr(model_type)} is not supported ({origin}); supported: {', '.join(READERS)}",
        )
    fields = READERS[model_type](_Config(data, origin), name)
    fields["source"] = f"Hugging Face config.json ({model_type}): {origin}"
    return ModelSpec(**fields)


def load_hf_config(path: str | Path) -> ModelSpec:
    """The ModelSpec of a config.json file (or of the config.json in a folder); named after the file or folder."""
    path = Path(path)
    if is_hf_config_path(path) and not str(path).lower().endswith(JSON_SUFFIX):
        path = path / "config.json"
    text = read_bounded("model", path, "json_bytes")  # a regular file within its size limit
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ConfigError("model", f"cannot read {short_repr(str(path), 200)} as JSON: {error}") from None
    name = path.parent.name if path.name == "config.json" else path.stem
    return model_from_hf_dict(data, name, str(path))
