"""The dense decoders of earlier published training runs and their successors: GPT-2 and StarCoder (gpt_bigcode),
OPT, BLOOM, GPT-NeoX (Pythia), Falcon, MPT, Gemma 1 to 3, Phi-3, StarCoder2, OLMo and OLMo 2 / 3, Granite; and
DBRX, an MoE written in MPT's key names.

Each family spells the shared keys its own way (transformers' ``attribute_map``: GPT-2's ``n_layer`` is
``num_hidden_layers``) and its saved config.json leaves out what its config class defaults (``save_pretrained``
writes only the values that differ). ``canonical`` writes a family's mapping in the names config.py's ``_common``
reads, under the class's defaults; ``classic_fields`` then adds the FFN, the key-value heads and the positions.
Learned absolute positions (GPT-2, OPT, StarCoder) and ALiBi (BLOOM, MPT, Falcon with ``alibi``) add no kernel that
moesim times (``rope`` False); biases on the linear layers are not simulated (well under 0.1% of a layer's work).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from topologies.errors import short_repr
from workloads.inputs.huggingface.hybrid import ConfigReads

# GPT2Config.attribute_map (and GPTBigCodeConfig's): the keys a GPT-2 style config.json holds
_GPT2_NAMES = {
    "num_hidden_layers": ("n_layer",),
    "hidden_size": ("n_embd",),
    "num_attention_heads": ("n_head",),
    "hidden_dropout": ("resid_pdrop",),
    "attention_dropout": ("attn_pdrop",),
}
# A plain MLP's activation by the names configs give it (HF ACT2FN); a gated MLP (Gemma's GeGLU) is timed as
# SwiGLU, whose three matrices and one elementwise pass it shares.
_PLAIN = {"gelu": "gelu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu", "relu": "relu"}


@dataclass(frozen=True)
class Family:
    """How one model type writes the shared keys: ``names`` maps a key ``_common`` reads to the family's own
    spellings (tried in order where the key itself is absent); ``defaults`` are its config class's values for the keys
    a saved file may omit; ``gated`` whether its MLP has a gate (SwiGLU, GeGLU), ``act_key`` the key naming a plain
    MLP's activation; ``ffn`` the key of the MLP's width, else ``ffn_ratio`` x hidden; ``rope`` the positions."""

    names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    gated: bool = False
    act_key: str = "hidden_act"
    ffn: str = "intermediate_size"
    ffn_ratio: int = 0
    rope: bool = True
    qk_norm: bool = False


_GEMMA_DEFAULTS = {"tie_word_embeddings": True, "head_dim": 256, "rope_theta": 10000.0}
FAMILIES: dict[str, Family] = {
    # GPT2Config: n_inner None is 4 x n_embd, gelu_new, dropouts 0.1, the head tied to wte
    "gpt2": Family(
        _GPT2_NAMES,
        {"tie_word_embeddings": True, "resid_pdrop": 0.1, "attn_pdrop": 0.1, "activation_function": "gelu_new"},
        act_key="activation_function",
        ffn="n_inner",
        ffn_ratio=4,
        rope=False,
    ),
    # GPTBigCodeConfig (StarCoder, SantaCoder): GPT-2's keys, one key-value head under multi_query
    "gpt_bigcode": Family(
        _GPT2_NAMES,
        {
            "tie_word_embeddings": True,
            "resid_pdrop": 0.1,
            "attn_pdrop": 0.1,
            "activation_function": "gelu_pytorch_tanh",
            "multi_query": True,
        },
        act_key="activation_function",
        ffn="n_inner",
        ffn_ratio=4,
        rope=False,
    ),
    # OPTConfig: ffn_dim, ReLU, dropout 0.1, the head tied to embed_tokens
    "opt": Family(
        {"hidden_dropout": ("dropout",)},
        {"tie_word_embeddings": True, "dropout": 0.1, "activation_function": "relu"},
        act_key="activation_function",
        ffn="ffn_dim",
        rope=False,
    ),
    # BloomConfig: n_layer / n_head (attribute_map), n_embed popped into hidden_size; 4h GeLU MLP, ALiBi, tied head
    "bloom": Family(
        {"num_hidden_layers": ("n_layer",), "num_attention_heads": ("n_head",), "hidden_size": ("n_embed",)},
        {"tie_word_embeddings": True, "hidden_act": "gelu"},
        act_key="",
        ffn="",
        ffn_ratio=4,
        rope=False,
    ),
    # GPTNeoXConfig: rotary on rotary_pct of each head (all of it timed), GeLU MLP of intermediate_size, untied head
    "gpt_neox": Family(defaults={"hidden_act": "gelu"}),
    # FalconConfig (and the RefinedWeb configs before it: n_layer, n_head, n_head_kv); the KV heads in _falcon_kv
    "falcon": Family(
        {
            "num_hidden_layers": ("n_layer",),
            "num_attention_heads": ("n_head",),
            "num_kv_heads": ("n_head_kv",),
            "hidden_size": ("n_embed",),
        },
        {"tie_word_embeddings": True, "multi_query": True, "new_decoder_architecture": False, "activation": "gelu"},
        act_key="activation",
        ffn="ffn_hidden_size",
        ffn_ratio=4,
    ),
    # MptConfig: d_model, n_heads, n_layers, expansion_ratio x d_model GeLU MLP, ALiBi or learned positions, tied
    "mpt": Family(
        {
            "hidden_size": ("d_model",),
            "num_attention_heads": ("n_heads",),
            "num_hidden_layers": ("n_layers",),
            "hidden_dropout": ("resid_pdrop",),
        },
        {"tie_word_embeddings": True, "expansion_ratio": 4},
        act_key="",
        ffn="",
        rope=False,
    ),
    # GemmaConfig (gemma-7b's sizes as defaults): GeGLU MLP, head_dim 256, tied head
    "gemma": Family(
        defaults={
            **_GEMMA_DEFAULTS,
            "vocab_size": 256000,
            "num_key_value_heads": 16,
        },
        gated=True,
    ),
    # Gemma2Config: sliding windows of 4,096 on the even layers (layer_types where the file gives them)
    "gemma2": Family(defaults={**_GEMMA_DEFAULTS, "vocab_size": 256000, "sliding_window": 4096}, gated=True),
    # Gemma3TextConfig: every sliding_window_pattern-th layer global, the others windowed; q / k RMSNorms. A multimodal
    # config writes its text_config as a diff against these defaults (PretrainedConfig.to_diff_dict), so all are given
    "gemma3_text": Family(
        defaults={
            **_GEMMA_DEFAULTS,
            "hidden_size": 2304,
            "intermediate_size": 9216,
            "num_hidden_layers": 26,
            "num_attention_heads": 8,
            "vocab_size": 262208,
            "rope_theta": 1_000_000.0,
            "sliding_window": 4096,
            "sliding_window_pattern": 6,
            "num_key_value_heads": 4,
        },
        gated=True,
        qk_norm=True,
    ),
    # Phi3Config: Llama's SwiGLU (gate and up fused in one matrix), its window on every layer where given
    "phi3": Family({"hidden_dropout": ("resid_pdrop",)}, gated=True),
    # Starcoder2Config: a plain GeLU MLP of intermediate_size, GQA, its window on every layer where given
    "starcoder2": Family(
        {"hidden_dropout": ("residual_dropout",)}, {"tie_word_embeddings": True, "hidden_act": "gelu_pytorch_tanh"}
    ),
    # OLMo: Llama's layers; OLMo 2 and 3 norm q and k (Olmo2Attention q_norm, k_norm), OLMo 3 windows per layer_types
    "olmo": Family(gated=True),
    "olmo2": Family(gated=True, qk_norm=True),
    "olmo3": Family(gated=True, qk_norm=True),
    # GraniteConfig: Llama's layers; its embedding, residual and logit multipliers change no kernel's work
    "granite": Family(gated=True),
    # DbrxConfig: MPT's names for the shared keys, the MoE in ffn_config and the KV heads in attn_config (_dbrx)
    "dbrx": Family(
        {"hidden_size": ("d_model",), "num_attention_heads": ("n_heads",), "num_hidden_layers": ("n_layers",)},
        {"tie_word_embeddings": False},
        gated=True,
    ),
}
# transformers maps Falcon's first configs to FalconConfig (CONFIG_MAPPING_NAMES) and Gemma 3's multimodal configs
# hold the text model under text_config
ALIASES = {"RefinedWeb": "falcon", "RefinedWebModel": "falcon", "gemma3": "gemma3_text"}


def canonical(model_type: str, data: dict) -> dict:
    """``data`` in the key names ``_common`` reads, over ``model_type``'s defaults (text_config unwrapped for a
    multimodal Gemma 3); the family's own keys stay for ``classic_fields``."""
    if model_type == "gemma3" and isinstance(data.get("text_config"), dict):
        data = data["text_config"]
    family = FAMILIES[ALIASES.get(model_type, model_type)]
    out = {**family.defaults, **data}
    for key, spellings in family.names.items():
        if key not in data:
            found = next((name for name in spellings if name in out), None)
            if found is not None:
                out[key] = out[found]
    return out


def _windowed(c: ConfigReads, model_type: str, layers: int) -> tuple[int, ...] | None:
    """Gemma 2 / 3's windowed layers where the file has no layer_types (config.py's _common reads those)."""
    if "layer_types" in c.data:
        return None
    if model_type == "gemma2":
        return tuple(range(0, layers, 2))  # Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2)
    if model_type == "gemma3_text":
        pattern = c.positive("sliding_window_pattern", 6)
        return tuple(i for i in range(layers) if (i + 1) % pattern)
    return None


def _falcon_kv(c: ConfigReads, heads: int) -> int:
    """FalconAttention: num_kv_heads under new_decoder_architecture (default: every head), else one under
    multi_query, else every head."""
    if c.bool("new_decoder_architecture", False):
        return c.int("num_kv_heads", default=heads)
    return 1 if c.bool("multi_query", True) else heads


def _mpt_attention(c: ConfigReads, heads: int) -> tuple[int, float]:
    """MPT's attn_config: its key-value heads (LLM Foundry's grouped or multi-query attention) and attn_pdrop."""
    attn = c.data.get("attn_config") or {}
    if not isinstance(attn, dict):
        raise c.fail("attn_config", f"must be a mapping, got {short_repr(attn)}")
    kind = attn.get("attn_type", "multihead_attention")
    kv = 1 if kind == "multiquery_attention" else heads
    if kind == "grouped_query_attention":
        kv = _section_int(c, "attn_config", "kv_n_heads", heads)
    dropout = attn.get("attn_pdrop") or 0.0
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise c.fail("attn_config.attn_pdrop", f"must be a probability in [0, 1), got {short_repr(dropout)}")
    return kv, float(dropout)


def _section_int(c: ConfigReads, section: str, key: str, default: int) -> int:
    """A positive integer of a nested config section (DBRX's attn_config / ffn_config), its class default if absent."""
    block = c.data.get(section) or {}
    value = block.get(key, default) if isinstance(block, dict) else block
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise c.fail(f"{section}.{key}", f"must be a positive integer, got {short_repr(value)}")
    return value


def _dbrx(c: ConfigReads, common: dict[str, Any]) -> dict[str, Any]:
    """DBRX (HF modeling_dbrx): every layer an MoE of ffn_config's moe_num_experts GLU experts of ffn_hidden_size, top
    moe_top_k, and GQA attention of attn_config's kv_n_heads (the defaults of DbrxFFNConfig / DbrxAttentionConfig)."""
    return {
        **common,
        "num_kv_heads": _section_int(c, "attn_config", "kv_n_heads", 1),
        "num_experts": _section_int(c, "ffn_config", "moe_num_experts", 4),
        "top_k": _section_int(c, "ffn_config", "moe_top_k", 1),
        "expert_ffn_size": _section_int(c, "ffn_config", "ffn_hidden_size", 3584),
        "rope": True,
    }


def classic_fields(c: ConfigReads, model_type: str, common: dict[str, Any]) -> dict[str, Any]:
    """A classic family's ModelSpec fields: ``common`` (config.py's _common on ``canonical``'s mapping) with every
    layer a dense MLP, its key-value heads and its positions."""
    model_type = ALIASES.get(model_type, model_type)
    if model_type == "dbrx":
        return _dbrx(c, common)
    family = FAMILIES[model_type]
    hidden, heads, layers = common["hidden_size"], common["num_heads"], common["num_layers"]
    width = c.int(family.ffn, default=0) if family.ffn else 0
    if model_type == "mpt":
        width = c.positive("expansion_ratio", 4) * hidden
    width = width or family.ffn_ratio * hidden
    if width <= 0:
        raise c.fail(family.ffn or "intermediate_size", "missing key in config.json")
    activation = "swiglu"
    if not family.gated:
        name = c.data.get(family.act_key, "gelu") if family.act_key else "gelu"
        if not isinstance(name, str) or name not in _PLAIN:
            raise c.fail(family.act_key, f"{short_repr(name)} is not an MLP activation moesim times")
        activation = _PLAIN[name]
    fields = {
        **common,
        "dense_ffn_size": width,
        "ffn_activation": activation,
        "expert_ffn_size": 0,
        "num_experts": 0,
        "top_k": 0,
        "rope": family.rope and not c.bool("alibi", False),
        "qk_layernorm": family.qk_norm,
    }
    if model_type == "falcon":
        fields["num_kv_heads"] = _falcon_kv(c, heads)
    elif model_type == "gpt_bigcode":
        fields["num_kv_heads"] = 1 if c.bool("multi_query", True) else heads
    elif model_type == "mpt":
        fields["num_kv_heads"], fields["attention_dropout"] = _mpt_attention(c, heads)
    windowed = _windowed(c, model_type, layers)
    if windowed is not None:
        fields.pop("sliding_window", None)
        fields.pop("window_layers", None)
        window = c.int("sliding_window", default=0)
        if window and windowed:
            fields.update(sliding_window=window, window_layers=windowed)
    return fields
