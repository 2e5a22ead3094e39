"""The classic dense decoders' config.json readers (workloads/inputs/huggingface/classic.py): each family's own key
names, its config class's defaults for what a saved file leaves out, its MLP, key-value heads and positions."""

from __future__ import annotations

import pytest

from topologies.errors import ConfigError
from workloads.inputs.huggingface.config import model_from_hf_dict

GPT2_XL = {"model_type": "gpt2", "n_embd": 1600, "n_head": 25, "n_layer": 48, "vocab_size": 50257}


def test_gpt2_reads_its_own_key_names_and_its_class_defaults() -> None:
    model = model_from_hf_dict(GPT2_XL, "gpt2-xl")
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads) == (48, 1600, 25, 25)
    # GPT2Config: n_inner None is 4 x n_embd, gelu_new, resid / attn dropout 0.1, the head tied to wte
    assert (model.dense_ffn_size, model.ffn_activation, model.tied_embeddings) == (6400, "gelu", True)
    assert (model.hidden_dropout, model.attention_dropout, model.rope) == (0.1, 0.1, False)
    assert model.num_experts == 0
    # 48 layers of 12 h^2 (the biases, norms and learned positions are not counted) and one tied embedding
    assert model.total_params == pytest.approx(48 * 12 * 1600**2 + 50257 * 1600, rel=1e-3)


def test_a_key_the_file_gives_wins_over_the_class_default() -> None:
    model = model_from_hf_dict({**GPT2_XL, "n_inner": 5000, "resid_pdrop": 0.0, "tie_word_embeddings": False}, "x")
    assert (model.dense_ffn_size, model.hidden_dropout, model.tied_embeddings) == (5000, 0.0, False)


@pytest.mark.parametrize(
    "data, kv_heads",
    [
        ({"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "num_hidden_layers": 32}, 1),
        (
            {
                "model_type": "falcon",
                "hidden_size": 4544,
                "num_attention_heads": 71,
                "num_hidden_layers": 32,
                "multi_query": False,
            },
            71,
        ),
        # Falcon-40B as its first (RefinedWeb) config spells it: n_layer, n_head, n_head_kv
        (
            {
                "model_type": "RefinedWeb",
                "hidden_size": 8192,
                "n_head": 128,
                "n_head_kv": 8,
                "n_layer": 60,
                "new_decoder_architecture": True,
            },
            8,
        ),
    ],
)
def test_falcon_takes_its_key_value_heads_as_falcon_attention_does(data: dict, kv_heads: int) -> None:
    model = model_from_hf_dict({"vocab_size": 65024, **data}, "falcon")
    assert model.num_kv_heads == kv_heads
    assert (model.dense_ffn_size, model.ffn_activation, model.rope) == (4 * data["hidden_size"], "gelu", True)


def test_falcon_with_alibi_has_no_rotary_kernels() -> None:
    data = {"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2,
            "vocab_size": 100, "alibi": True}  # fmt: skip
    assert model_from_hf_dict(data, "f").rope is False


def test_opt_mpt_bigcode_and_starcoder2_run_plain_mlps() -> None:
    opt = model_from_hf_dict(
        {"model_type": "opt", "hidden_size": 9216, "ffn_dim": 36864, "num_attention_heads": 72,
         "num_hidden_layers": 64, "vocab_size": 50272}, "opt-66b")  # fmt: skip
    assert (opt.dense_ffn_size, opt.ffn_activation, opt.hidden_dropout, opt.tied_embeddings) == (
        36864,
        "relu",
        0.1,
        True,
    )
    mpt = model_from_hf_dict(
        {"model_type": "mpt", "d_model": 7168, "n_heads": 64, "n_layers": 48, "vocab_size": 50432,
         "attn_config": {"alibi": True, "attn_pdrop": 0.0}}, "mpt-30b")  # fmt: skip
    assert (mpt.hidden_size, mpt.num_layers, mpt.dense_ffn_size, mpt.num_kv_heads, mpt.rope) == (
        7168,
        48,
        28672,
        64,
        False,
    )
    gqa = model_from_hf_dict(
        {"model_type": "mpt", "d_model": 256, "n_heads": 8, "n_layers": 2, "vocab_size": 100,
         "attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 2}}, "m")  # fmt: skip
    assert gqa.num_kv_heads == 2
    starcoder = model_from_hf_dict(
        {"model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48, "n_layer": 40, "n_inner": 24576,
         "vocab_size": 49152}, "starcoder")  # fmt: skip
    assert (starcoder.num_kv_heads, starcoder.dense_ffn_size, starcoder.ffn_activation) == (1, 24576, "gelu")
    starcoder2 = model_from_hf_dict(
        {"model_type": "starcoder2", "hidden_size": 6144, "intermediate_size": 24576, "num_attention_heads": 48,
         "num_key_value_heads": 4, "num_hidden_layers": 40, "vocab_size": 49152, "rope_theta": 100000,
         "sliding_window": 4096}, "starcoder2-15b")  # fmt: skip
    assert (starcoder2.ffn_activation, starcoder2.num_kv_heads, starcoder2.rope) == ("gelu", 4, True)
    assert starcoder2.window_layers == tuple(range(40))


GEMMA2_2B = {"model_type": "gemma2", "hidden_size": 2304, "intermediate_size": 9216, "num_attention_heads": 8,
             "num_key_value_heads": 4, "num_hidden_layers": 26}  # fmt: skip


def test_gemma_families_window_the_layers_their_decoder_layers_do() -> None:
    gemma2 = model_from_hf_dict(GEMMA2_2B, "gemma-2-2b")
    assert gemma2.window_layers == tuple(range(0, 26, 2)) and gemma2.sliding_window == 4096  # the class default
    assert (gemma2.ffn_activation, gemma2.tied_embeddings, gemma2.vocab_size, gemma2.head_dim) == (
        "swiglu",
        True,
        256000,
        256,
    )
    # a multimodal Gemma 3: the text model under text_config, every 6th layer global, q / k normed
    gemma3 = model_from_hf_dict(
        {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 5376,
         "intermediate_size": 21504, "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
         "head_dim": 128, "sliding_window": 1024}}, "gemma-3-27b")  # fmt: skip
    assert gemma3.window_layers == tuple(i for i in range(62) if (i + 1) % 6)
    assert (gemma3.sliding_window, gemma3.qk_layernorm, gemma3.vocab_size) == (1024, True, 262208)
    # layer_types, where the file gives them, say which layers are windowed
    types = ["sliding_attention", "full_attention"] * 13
    types[0] = "full_attention"
    listed = model_from_hf_dict({**GEMMA2_2B, "layer_types": types}, "g")
    assert listed.window_layers == tuple(range(2, 26, 2))


@pytest.mark.parametrize("model_type, qk_norm", [("olmo", False), ("olmo2", True), ("granite", False), ("phi3", False)])
def test_llama_like_families_run_swiglu(model_type: str, qk_norm: bool) -> None:
    data = {"model_type": model_type, "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
            "num_hidden_layers": 32, "vocab_size": 100352, "rope_theta": 500000}  # fmt: skip
    model = model_from_hf_dict(data, model_type)
    assert (model.ffn_activation, model.dense_ffn_size, model.qk_layernorm, model.rope) == (
        "swiglu",
        11008,
        qk_norm,
        True,
    )


def test_errors_name_the_family_key() -> None:
    with pytest.raises(ConfigError, match="n_layer"):
        model_from_hf_dict({"model_type": "gpt2", "n_embd": 64, "n_head": 2, "vocab_size": 10}, "x")
    with pytest.raises(ConfigError, match="activation_function.*'swish'"):
        model_from_hf_dict({**GPT2_XL, "activation_function": "swish"}, "x")
    with pytest.raises(ConfigError, match="ffn_dim"):
        model_from_hf_dict({"model_type": "opt", "hidden_size": 64, "num_attention_heads": 2,
                            "num_hidden_layers": 2, "vocab_size": 10}, "x")  # fmt: skip
    with pytest.raises(ConfigError, match="kv_n_heads"):
        model_from_hf_dict({"model_type": "mpt", "d_model": 64, "n_heads": 2, "n_layers": 2, "vocab_size": 10,
                            "attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 0}}, "x")  # fmt: skip


def test_mixtral_keyed_moe_families() -> None:
    """Phi-3.5-MoE (microsoft/Phi-3.5-MoE-instruct config.json) reads as Mixtral does: 41.9B parameters, 6.6B active
    (its model card: 16 x 3.8B experts, 6.6B active); Granite MoE with a shared expert adds its shared MLP."""
    phi = model_from_hf_dict(
        {"model_type": "phimoe", "hidden_size": 4096, "intermediate_size": 6400, "num_attention_heads": 32,
         "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 16, "num_experts_per_tok": 2,
         "vocab_size": 32064, "rope_theta": 10000.0}, "phi-3.5-moe")  # fmt: skip
    assert (phi.num_experts, phi.top_k, phi.expert_ffn_size) == (16, 2, 6400)
    assert round(phi.total_params / 1e9, 1) == 41.9 and round(phi.active_params / 1e9, 1) == 6.6
    granite = {"model_type": "granitemoeshared", "hidden_size": 1024, "intermediate_size": 512, "num_attention_heads": 16,
               "num_hidden_layers": 24, "num_local_experts": 32, "num_experts_per_tok": 8, "vocab_size": 49155,
               "shared_intermediate_size": 1024}  # fmt: skip
    model = model_from_hf_dict(granite, "granite-moe-shared")
    assert (model.num_shared_experts, model.shared_expert_ffn_size, model.top_k) == (1, 1024, 8)
    assert model_from_hf_dict({**granite, "shared_intermediate_size": 0}, "g").num_shared_experts == 0


def test_dbrx_reads_its_moe_from_ffn_config() -> None:
    """DBRX (databricks/dbrx-base config.json): 16 experts of 10,752, top 4, 8 KV heads: 131.6B parameters, 36.5B
    active (Databricks' announcement: 132B total, 36B active)."""
    dbrx = {"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40, "vocab_size": 100352,
            "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "rope_theta": 500000},
            "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4}}  # fmt: skip
    model = model_from_hf_dict(dbrx, "dbrx")
    assert (model.num_experts, model.top_k, model.expert_ffn_size, model.num_kv_heads) == (16, 4, 10752, 8)
    assert (round(model.total_params / 1e9), round(model.active_params / 1e9)) == (132, 36)
    with pytest.raises(ConfigError, match="ffn_config.moe_top_k"):
        model_from_hf_dict({**dbrx, "ffn_config": {"moe_top_k": 0}}, "x")
