"""model_type kimi_k2 (workloads/inputs/huggingface/config.py): DeepSeek-V3's architecture at 384 experts and 64 heads, read
from examples/models/kimi-k2.json (moonshotai/Kimi-K2-Instruct's config.json keys); model types with layers moesim
cannot express (Mamba, linear attention) refused by name."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from topologies.errors import ConfigError
from workloads.inputs.huggingface.config import model_from_hf_dict
from workloads.inputs.yaml_files import load_model

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


def _round_to(value: float, digits: int) -> float:
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def test_kimi_k2_is_deepseek_v3_s_architecture() -> None:
    """The same config read as deepseek_v3 (Moonshot's documented workaround: docs/deploy_guidance.md, "Others")
    gives the same model."""
    data = json.loads((MODELS / "kimi-k2.json").read_text())
    kimi = model_from_hf_dict(data, "k2")
    as_v3 = model_from_hf_dict({**data, "model_type": "deepseek_v3"}, "k2")
    assert kimi.with_(source="") == as_v3.with_(source="")
    assert (kimi.attention, kimi.num_experts, kimi.top_k, kimi.num_heads) == ("mla", 384, 8, 64)
    assert (kimi.num_dense_layers, kimi.num_shared_experts, kimi.mtp_layers) == (1, 1, 0)


def test_published_parameter_counts() -> None:
    """MoonshotAI/Kimi-K2 README (commit 11062d1, "Model Summary"): 1T total, 32B activated. Ours: 1.026T; 32.7B
    active with the input embedding, 31.5B without it; the README's "32B" rounds the second (the embedding is a
    lookup, as GPT-OSS's model card counts it)."""
    model = load_model(MODELS / "kimi-k2.json")
    assert _round_to(model.total_params, 1) == 1e12
    active = model.active_params - model.vocab_size * model.hidden_size
    assert _round_to(active, 2) == 32e9


def test_total_by_hand() -> None:
    """61 layers of MLA (h 7168, 64 heads, q rank 1536, kv rank 512, 128 + 64 qk, 128 v), one dense SwiGLU of
    18,432, 60 MoE layers of 384 + 1 shared experts of 2,048 and a router, untied embeddings of 163,840."""
    h, heads, q_rank, kv_rank = 7168, 64, 1536, 512
    attention = h * q_rank + q_rank * heads * 192 + h * (kv_rank + 64) + kv_rank * heads * (128 + 128) + heads * 128 * h
    norms = q_rank + kv_rank  # the MLA down-projections' RMSNorms
    dense, expert, router = 3 * h * 18432, 3 * h * 2048, h * 384
    layers = 61 * (attention + norms + 2 * h) + dense + 60 * (385 * expert + router)
    total = layers + 2 * 163840 * h  # embedding and head (moesim leaves out the final norm's 7,168 weights)
    assert load_model(MODELS / "kimi-k2.json").total_params == total


@pytest.mark.parametrize("model_type", ["jamba", "falcon_h1", "kimi_linear"])
def test_layers_moesim_cannot_express_are_named(model_type: str) -> None:
    """Hybrid Mamba and linear-attention models: a refusal that says which layers are not modelled."""
    with pytest.raises(ConfigError) as error:
        model_from_hf_dict({"model_type": model_type}, "x")
    assert error.value.field == "model.model_type" and "not modelled" in error.value.rule
