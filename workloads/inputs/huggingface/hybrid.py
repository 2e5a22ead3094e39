"""The hybrid models' config.json readers: Nemotron-H / Nemotron 3 (Mamba-2, attention, MLP and MoE blocks) and
Qwen3-Next / Qwen3.5 / Qwen3.6 (Gated DeltaNet or gated attention, then an MoE or a dense FFN, in every layer). Each
returns a hybrid pattern, one block per symbol (workloads/specs/model_extensions.py HYBRID_BLOCKS), beside the fields
every decoder shares (``common``, workloads/inputs/huggingface/config.py, which dispatches to these)."""

from __future__ import annotations

from typing import Any, Protocol

from topologies.errors import ConfigError, short_repr


class ConfigReads(Protocol):
    """The typed reads of one config mapping (workloads/inputs/huggingface/config.py _Config)."""

    data: dict
    origin: str

    def fail(self, key: str, rule: str) -> ConfigError: ...

    def int(self, key: str, *fallbacks: str, default: int | None = None) -> int: ...

    def positive(self, key: str, default: int) -> int: ...

    def bool(self, key: str, default: bool) -> bool: ...

    def int_list(self, key: str) -> tuple[int, ...]: ...


# NemotronH's layers_block_type names (transformers' NemotronHConfig turns hybrid_override_pattern into them)
BLOCK_SYMBOLS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def nemotron_h(c: ConfigReads, common: dict[str, Any]) -> dict[str, Any]:
    """Nemotron-H and Nemotron 3 (HF modeling_nemotron_h, NVIDIA's NemotronHForCausalLM): one block per layer as
    hybrid_override_pattern (or layers_block_type) lists them: Mamba-2 mixers (mamba_num_heads of mamba_head_dim,
    ssm_state_size, n_groups, conv_kernel, chunk_size), attention without rotary embedding, plain MLPs of
    intermediate_size and MoE layers of n_routed_experts (moe_intermediate_size; the shared expert of
    moe_shared_expert_intermediate_size; a latent MoE's moe_latent_size), every MLP with squared ReLU [mlp_hidden_act
    relu2]; MTP modules of attention and MoE [num_nextn_predict_layers, mtp_layers_block_type]."""
    pattern = c.data.get("hybrid_override_pattern")
    if pattern is None and isinstance(c.data.get("layers_block_type"), list):
        types = c.data["layers_block_type"]
        unknown = sorted({t for t in types if t not in BLOCK_SYMBOLS}, key=str)
        if unknown:
            raise c.fail("layers_block_type", f"{short_repr(unknown[0])} is not a block moesim simulates")
        pattern = "".join(BLOCK_SYMBOLS[t] for t in types)
    if not isinstance(pattern, str) or not pattern:
        raise c.fail("hybrid_override_pattern", "a nemotron_h config.json must give its layers' pattern")
    act = c.data.get("mlp_hidden_act", c.data.get("hidden_act", "relu2"))
    if act != "relu2":
        raise c.fail("mlp_hidden_act", f"a nemotron_h MLP runs relu2, got {short_repr(act)}")
    fields = {
        **common,
        "rope": False,  # NemotronHAttention applies no rotary embedding
        "hybrid_pattern": pattern,
        "ffn_activation": "squared_relu",
        "mamba_heads": c.int("mamba_num_heads"),
        "mamba_head_dim": c.int("mamba_head_dim"),
        "mamba_state_dim": c.int("ssm_state_size"),
        "mamba_groups": c.int("n_groups"),
        "mamba_conv_kernel": c.int("conv_kernel", default=4),
        "mamba_chunk": c.int("chunk_size", default=128),
        "num_experts": 0,
        "top_k": 0,
        "expert_ffn_size": 0,
    }
    if "-" in pattern:
        fields["dense_ffn_size"] = c.int("intermediate_size")
    mtp = c.data.get("mtp_layers_block_type") or []
    if mtp and mtp != ["attention", "moe"]:
        raise c.fail("mtp_layers_block_type", f"{short_repr(mtp)}: moesim's MTP module is attention, then MoE")
    fields["mtp_layers"] = c.int("num_nextn_predict_layers", default=1 if mtp else 0)
    if "E" in pattern:
        shared = c.int("moe_shared_expert_intermediate_size", default=0) * c.int("n_shared_experts", default=1)
        fields.update(
            num_experts=c.int("n_routed_experts"),
            top_k=c.int("num_experts_per_tok"),
            expert_ffn_size=c.int("moe_intermediate_size"),
            num_shared_experts=1 if shared else 0,
            shared_expert_ffn_size=shared,
            moe_latent_size=c.int("moe_latent_size", default=0),
        )
    return fields


_LINEAR_TYPES = {"linear_attention": "G", "full_attention": "*"}


def qwen3_next(c: ConfigReads, common: dict[str, Any]) -> dict[str, Any]:
    """Qwen3-Next and Qwen3.5 / Qwen3.6 (HF modeling_qwen3_next; qwen3_5_moe, qwen3_5 and their _text configs): each
    layer a Gated DeltaNet mixer [linear_num_key_heads of linear_key_head_dim, linear_num_value_heads of
    linear_value_head_dim, linear_conv_kernel_dim] or, every full_attention_interval-th layer (or as layer_types
    says), full attention with its output gate [attn_output_gate] and per-head q / k norms; then an MoE FFN of
    num_experts [num_experts_per_tok, moe_intermediate_size, one shared expert of shared_expert_intermediate_size] on
    the layers decoder_sparse_step and mlp_only_layers leave to it, else a SwiGLU of intermediate_size (every layer of
    a dense Qwen3.5). Each layer is two blocks of the hybrid pattern, mixer then FFN, as Megatron-Core's hybrid model
    writes it ("G" / "*" then "E" / "-"); MTP modules [mtp_num_hidden_layers] are attention and an MoE FFN each. The
    shared expert's sigmoid gate (one h x 1 GEMM) and the partial rotary embedding's narrower width are not simulated
    apart."""
    layers = common["num_layers"]
    types = c.data.get("layer_types")
    if types is None:
        interval = c.positive("full_attention_interval", default=4)
        mixers = ["*" if (i + 1) % interval == 0 else "G" for i in range(layers)]
    elif not isinstance(types, list) or len(types) != layers or any(t not in _LINEAR_TYPES for t in types):
        raise c.fail("layer_types", f"must list linear_attention or full_attention for each of the {layers} layers")
    else:
        mixers = [_LINEAR_TYPES[t] for t in types]
    experts = c.int("num_experts", default=0)
    step = c.positive("decoder_sparse_step", default=1)
    dense = set(c.int_list("mlp_only_layers")) | {i for i in range(layers) if (i + 1) % step}
    ffns = ["-" if not experts or i in dense else "E" for i in range(layers)]
    fields = {
        **common,
        "num_layers": 2 * layers,
        "hybrid_pattern": "".join(mixer + ffn for mixer, ffn in zip(mixers, ffns)),
        "qk_layernorm": True,  # Qwen3NextAttention q_norm / k_norm
        "attention_output_gate": c.bool("attn_output_gate", True),
        "gdn_key_heads": c.int("linear_num_key_heads"),
        "gdn_value_heads": c.int("linear_num_value_heads"),
        "gdn_key_head_dim": c.int("linear_key_head_dim", default=128),
        "gdn_value_head_dim": c.int("linear_value_head_dim", default=128),
        "gdn_conv_kernel": c.int("linear_conv_kernel_dim", default=4),
        "mtp_layers": c.int("mtp_num_hidden_layers", "num_nextn_predict_layers", default=0),
        "num_experts": experts,
        "top_k": c.int("num_experts_per_tok") if experts else 0,
        "expert_ffn_size": c.int("moe_intermediate_size") if experts else 0,
    }
    if "-" in ffns:
        fields["dense_ffn_size"] = c.int("intermediate_size")
    shared = c.int("shared_expert_intermediate_size", default=0) if experts else 0
    if shared:
        fields.update(num_shared_experts=1, shared_expert_ffn_size=shared)
    return fields
