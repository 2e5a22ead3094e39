"""Model types read from config.json beside DeepSeek, Qwen, Mixtral and GPT-OSS (workloads/inputs/huggingface/config.py):
glm4_moe, ernie4_5_moe, minimax_m2 and Llama 4's text model, each counted by hand from its config.json keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.report.simulate import simulate
from topologies.errors import ConfigError
from workloads.inputs.huggingface.config import load_hf_config, model_from_hf_dict
from workloads.specs.layouts import layout_preset

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


def _gqa_attention(h: int, heads: int, kv_heads: int, head_dim: int) -> int:
    return h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h


def test_ernie_4_5_21b_a3b_by_hand() -> None:
    """28 layers of GQA (h 2,560, 20 heads and 4 KV heads of 128); layer 0 a dense SwiGLU of 12,288; layers 1-27 MoE
    with 64 experts of 1,536, top-6, and 2 shared ones; tied embeddings of 103,424. The model card's "21B total,
    3B activated" (baidu/ERNIE-4.5-21B-A3B-PT) are 21.8B and 3.1B without the embedding."""
    model = load_hf_config(MODELS / "ernie-4.5-21b-a3b.json")
    assert (model.num_dense_layers, model.mlp_only_layers, model.num_experts, model.top_k) == (1, (), 64, 6)
    h, expert = 2560, 3 * 2560 * 1536
    layer_fixed = _gqa_attention(h, 20, 4, 128) + 2 * h  # + the two RMSNorms
    total = 28 * layer_fixed + 3 * h * 12288 + 27 * (66 * expert + h * 64) + 103424 * h
    assert model.total_params == total
    assert round((model.active_params - 103424 * h) / 1e9, 1) == 3.1


def test_llama_4_scout_by_hand_and_its_vision_free_total() -> None:
    """48 MoE layers of 16 experts of 8,192 plus one shared expert as wide, top-1, on GQA (40 heads, 8 KV heads of
    128); untied embeddings of 202,048. Meta's 17B active matches; its 109B total counts the vision encoder, which
    the text model leaves out (107.8B)."""
    model = load_hf_config(MODELS / "llama-4-scout.json")
    assert (model.num_experts, model.top_k, model.num_shared_experts, model.mlp_only_layers) == (16, 1, 1, ())
    h, expert = 5120, 3 * 5120 * 8192
    total = 48 * (_gqa_attention(h, 40, 8, 128) + 2 * h + 17 * expert + h * 16) + 2 * 202048 * h
    assert model.total_params == total
    assert round(model.active_params / 1e9) == 17


def test_llama_4_maverick_alternates_dense_and_moe_layers() -> None:
    """interleave_moe_layer_step 2: MoE on layers 1, 3, ..., 47 (HF Llama4TextConfig: range(step - 1, layers, step)),
    dense SwiGLUs of intermediate_size_mlp on the others."""
    model = load_hf_config(MODELS / "llama-4-maverick.json")
    assert model.mlp_only_layers == tuple(range(0, 48, 2)) and model.dense_ffn_size == 16384
    assert [model.layer_kind(i).dense for i in range(4)] == [True, False, True, False]


def test_llama4_text_config_and_explicit_moe_layers() -> None:
    """A llama4_text config (the text model alone) reads the same; moe_layers, where given, wins over the step."""
    text = json.loads((MODELS / "llama-4-scout.json").read_text())["text_config"]
    assert model_from_hf_dict(text, "scout").total_params == load_hf_config(MODELS / "llama-4-scout.json").total_params
    some = model_from_hf_dict({**text, "moe_layers": [0, 47]}, "scout")
    assert some.mlp_only_layers == tuple(range(1, 47))


def test_minimax_m2_mtp_only_with_use_mtp_and_no_shared_expert() -> None:
    """MiniMax-M2: 3 MTP modules when use_mtp is set, none without; a shared expert width other than 0 is named."""
    data = json.loads((MODELS / "minimax-m2.json").read_text())
    assert model_from_hf_dict(data, "m2").mtp_layers == 3
    assert model_from_hf_dict({**data, "use_mtp": False}, "m2").mtp_layers == 0
    with pytest.raises(ConfigError) as error:
        model_from_hf_dict({**data, "shared_intermediate_size": 1536}, "m2")
    assert error.value.field == "model.shared_intermediate_size"


def test_llama4_without_text_config_names_the_key() -> None:
    with pytest.raises(ConfigError) as error:
        model_from_hf_dict({"model_type": "llama4"}, "x")
    assert error.value.field == "model.text_config"


def test_glm_4_5_reads_deepseek_s_moe_pattern_on_gqa() -> None:
    """GLM-4.5: 3 dense layers, 160 experts of 1,536 top-8 and one shared expert, 96 heads of 128, q/k norms, one
    MTP module (which a Megatron job takes only from --mtp-num-layers)."""
    model = load_hf_config(MODELS / "glm-4.5.json")
    assert (model.attention, model.num_dense_layers, model.num_experts, model.top_k) == ("gqa", 3, 160, 8)
    assert (model.num_shared_experts, model.head_dim, model.qk_layernorm, model.mtp_layers) == (1, 128, True, 1)
    assert load_hf_config(MODELS / "glm-4.5-air.json").qk_layernorm is False


@pytest.mark.parametrize("name", ["glm-4.5-air", "ernie-4.5-21b-a3b", "llama-4-maverick", "minimax-m2"])
def test_each_family_simulates(name: str) -> None:
    """On 16 H800 with the paper's layout at SP/EP 4 and PP 2 (too few GPUs to hold the weights): every op list builds and the step runs."""
    report = simulate(
        str(MODELS / f"{name}.json"),
        layout_preset("megascale-moe").with_(pp=2, intra_size=4),
        16,
        global_batch=16,
        seq_len=4096,
        allow_oom=True,
    )
    assert report.step_time_s > 0 and report.model == name
