"""Hugging Face config.json as the model: published parameter counts, per-layer features, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.cli.main import main
from simulator.report.simulate import simulate
from topologies.errors import ConfigError
from workloads.inputs.yaml_files import load_model
from workloads.ops import attention_pairs
from workloads.recipes.layers import attention_recipe, layer_recipe
from workloads.specs.layouts import layout_preset
from workloads.specs.models import LayerKind, model_preset

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


def _round_to(value: float, digits: int) -> float:
    """``value`` rounded to ``digits`` significant figures."""
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


# (file, published total, published active, significant figures of the published numbers, embedding matrices the
# published active count leaves out: 0, the input embedding (1), or it and the output head (2)). Published figures
# with three or more significant figures are matched within 1%; "37B" or "3.3B" only say the count rounds to them,
# so the test rounds ours the same way.
PUBLISHED = [
    ("deepseek-v3", 671e9, 37e9, (3, 2), 0),  # DeepSeek-V3 report Sec. 1
    ("qwen3-235b-a22b", 235e9, 22e9, (3, 2), 0),  # Qwen3 technical report, Table 1
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, (3, 2), 0),  # Qwen3 technical report, Table 1
    ("gpt-oss-120b", 116.83e9, 5.13e9, (5, 3), 1),  # gpt-oss model card, Table 1
    ("mixtral-8x7b", 46.7e9, 12.9e9, (3, 3), 0),  # Jiang et al., Mixtral of Experts, Sec. 2.1
    ("llama-3.1-405b", 405e9, 405e9, (3, 3), 0),  # Llama 3 report (Dubey et al. 2024), Sec. 3.1 (dense)
    # GLM-4.5 report (arXiv 2508.06471), Table 1: 355B / 32B and 106B / 12B activated, embedding and output layer
    # not counted as activated; the MTP layer not counted in the total (ours leaves it out: ModelSpec.mtp_params)
    ("glm-4.5", 355e9, 32e9, (3, 2), 2),
    ("glm-4.5-air", 106e9, 12e9, (3, 2), 2),
    ("llama-4-maverick", 400e9, 17e9, (3, 2), 0),  # meta-llama/Llama-4-Maverick-17B-128E model card: 17B active, 400B
    ("minimax-m2", 230e9, 10e9, (3, 2), 1),  # MiniMaxAI/MiniMax-M2 model card: 230B total, 10B active (MTP not counted)
    # Qwen/Qwen3-Next-80B-A3B model card: "80B in total and 3B activated" (its exact count: tests/unit/test_gdn.py)
    ("qwen3-next-80b-a3b", 80e9, 3e9, (2, 1), 2),
    # the dense decoders of earlier runs (workloads/inputs/huggingface/classic.py): each model card's count
    ("gpt-neox-20b", 20_554_567_680, 20_554_567_680, (3, 3), 0),  # EleutherAI/gpt-neox-20b model card
    ("bloom-176b", 176_247_271_424, 176_247_271_424, (3, 3), 0),  # bigscience/bloom model card
    ("falcon-180b", 180e9, 180e9, (2, 2), 0),  # tiiuae/falcon-180B model card: "a 180B parameters" model
    ("gemma-2-27b", 27e9, 27e9, (2, 2), 0),  # Gemma 2 report (arXiv 2408.00118), Table 1: 27B
]


@pytest.mark.parametrize("name, total, active, digits, embeddings_left_out", PUBLISHED)
def test_parameter_counts_match_the_published_ones(
    name: str, total: float, active: float, digits: tuple[int, int], embeddings_left_out: int
) -> None:
    model = load_model(MODELS / f"{name}.json")
    counted = model.active_params - embeddings_left_out * model.vocab_size * model.hidden_size
    for ours, published, figures in ((model.total_params, total, digits[0]), (counted, active, digits[1])):
        if figures >= 3:
            assert ours == pytest.approx(published, rel=0.01)
        else:
            assert _round_to(ours, figures) == published


def test_mixtral_config_is_the_preset() -> None:
    """The shipped Mixtral config.json reads back as the Table 2 preset, field for field."""
    from_json = load_model(MODELS / "mixtral-8x7b.json")
    preset = model_preset("mixtral-8x7b")
    assert from_json.with_(name=preset.name, source=preset.source) == preset


def test_deepseek_v3_config_matches_the_preset_and_adds_mtp() -> None:
    from_json = load_model(MODELS / "deepseek-v3.json")
    preset = model_preset("deepseek-v3")
    assert from_json.mtp_layers == 1
    assert from_json.with_(name=preset.name, source=preset.source, mtp_layers=0) == preset
    # MTP (Sec. 2.2): two norms, the 2h -> h projection and one MoE layer; the published 14B adds its own
    # copy of the embedding and head (2 x 129,280 x 7,168 = 1.85B).
    h = 7168
    moe = 187_107_328 + 257 * 3 * h * 2048 + h * 256 + 2 * h
    assert from_json.mtp_params == 2 * h + 2 * h * h + moe


def test_qwen3_head_dim_is_not_hidden_over_heads() -> None:
    """Qwen3-235B: 64 heads of 128 (8,192) on a hidden size of 4,096: Q 4096 x 8192, K and V 4096 x 512,
    O 8192 x 4096 = 71,303,168 per layer."""
    model = load_model(MODELS / "qwen3-235b-a22b.json")
    assert (model.head_dim, model.q_width, model.qkv_width) == (128, 8192, 9216)
    assert model.attention_params == 4096 * 9216 + 8192 * 4096 == 71_303_168
    layout = layout_preset("megascale-moe").with_(pp=1)
    steps = {s.name: s for s in attention_recipe(model, layout, 4096)}
    assert steps["o_proj"].gemm.k == 8192 and steps["qkv_proj"].gemm.n == 9216
    # FLOPs: 4 b s^2 d H/n = 4 x 4096^2 x 128 x 8 on each of the 8 GPUs
    assert steps["flash_attn"].flops == 4 * 4096**2 * 128 * 8


def test_gpt_oss_sliding_window_layers() -> None:
    """GPT-OSS alternates sliding (128 keys) and full attention: even layers slide."""
    model = load_model(MODELS / "gpt-oss-120b.json")
    assert model.sliding_window == 128 and model.window_layers == tuple(range(0, 36, 2))
    assert model.layer_kind(0) == LayerKind(False, 128) and model.layer_kind(1) == LayerKind(False, 0)
    # Counted pairs: 2 s w - w^2 = 2 x 4096 x 128 - 128^2 = 1,032,192 (s^2 = 16,777,216 without the window)
    assert attention_pairs(4096, 128) == 1_032_192 and attention_pairs(4096) == 4096**2
    layout = layout_preset("megascale-moe").with_(pp=1)
    window = {s.name: s for s in layer_recipe(model, layout, 4096, 8, window=128)}
    full = {s.name: s for s in layer_recipe(model, layout, 4096, 8)}
    assert window["flash_attn"].flops * 4096**2 == full["flash_attn"].flops * 1_032_192
    assert window["expert_fc13"].gemm == full["expert_fc13"].gemm


def test_qwen2_moe_shared_expert_width_and_dense_models() -> None:
    qwen2 = load_model(MODELS / "qwen2-57b-a14b.json")
    assert qwen2.shared_ffn_size == 20480 and qwen2.shared_params == 3 * 3584 * 20480
    llama = load_model(MODELS / "llama-3.1-8b.json")
    assert llama.num_experts == 0 and llama.moe_layers == 0 and llama.layer_kind(5) == LayerKind(True, 0)
    assert llama.total_params == pytest.approx(8.03e9, rel=0.01)


def test_moe_layer_frequency() -> None:
    """DeepSeek: MoE on layers i >= first_k_dense_replace with i % moe_layer_freq == 0; Qwen: on layers with
    (i + 1) % decoder_sparse_step == 0 outside mlp_only_layers."""
    data = json.loads((MODELS / "deepseek-v2-lite.json").read_text())
    from workloads.inputs.huggingface.config import model_from_hf_dict

    every_other = model_from_hf_dict({**data, "num_hidden_layers": 6, "moe_layer_freq": 2}, "x")
    assert [every_other.layer_kind(i).dense for i in range(6)] == [True, True, False, True, False, True]
    qwen = json.loads((MODELS / "qwen3-30b-a3b.json").read_text())
    sparse = model_from_hf_dict({**qwen, "num_hidden_layers": 4, "decoder_sparse_step": 2, "mlp_only_layers": [3]}, "q")
    assert [sparse.layer_kind(i).dense for i in range(4)] == [True, False, True, True]


def test_folder_holding_a_config_json(tmp_path: Path) -> None:
    folder = tmp_path / "Qwen3-30B-A3B"
    folder.mkdir()
    (folder / "config.json").write_text((MODELS / "qwen3-30b-a3b.json").read_text())
    model = load_model(str(folder))
    assert model.name == "Qwen3-30B-A3B" and model.num_experts == 128


@pytest.mark.parametrize(
    "change, field",
    [
        ({"model_type": "arctic"}, "model.model_type"),
        ({"hidden_size": None}, "model.hidden_size"),
        ({"num_experts_per_tok": "8"}, "model.num_experts_per_tok"),
        ({"layer_types": ["full_attention"]}, "model.layer_types"),
    ],
)
def test_bad_configs_name_the_key(tmp_path: Path, change: dict, field: str) -> None:
    data = {**json.loads((MODELS / "gpt-oss-20b.json").read_text()), **change}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as error:
        load_model(str(path))
    assert error.value.field == field


def test_unreadable_json_is_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    assert main(["run", "--model", str(path), "--gpus", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "broken.json" in err


def test_a_config_json_simulates() -> None:
    """Qwen3-30B-A3B on 16 H800: SP/EP 8, PP 2 over 48 layers; every op list builds and the step runs."""
    report = simulate(
        str(MODELS / "qwen3-30b-a3b.json"),
        layout_preset("megascale-moe").with_(pp=2),
        16,
        global_batch=16,
        seq_len=4096,
    )
    assert report.step_time_s > 0 and report.model == "qwen3-30b-a3b"


def test_mistral_is_llama_with_its_window_on_every_layer() -> None:
    """Mistral 7B v0.1's config.json (mistralai/Mistral-7B-v0.1: 32 layers, hidden 4,096, 32 heads in 8 KV groups,
    SwiGLU 14,336, vocabulary 32,000, sliding_window 4,096); v0.2's null window is full attention."""
    from workloads.inputs.huggingface.config import model_from_hf_dict

    data = {
        "model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "sliding_window": 4096,
        "rope_theta": 10000.0, "tie_word_embeddings": False, "hidden_act": "silu",
    }  # fmt: skip
    v01 = model_from_hf_dict(data, "mistral-7b")
    assert (v01.num_experts, v01.dense_ffn_size, v01.num_kv_heads, v01.rope) == (0, 14336, 8, True)
    assert v01.sliding_window == 4096 and v01.window_layers == tuple(range(32))
    assert round(v01.total_params / 1e9, 2) == 7.24  # Mistral 7B's 7.24 B parameters (Jiang et al. 2023)
    assert model_from_hf_dict({**data, "sliding_window": None}, "mistral-7b-v0.2").window_layers == ()
