"""Beyond the paper, models: MLA, dense layers, shared experts, tied embeddings, the deepseek-v3 preset.

Hand-computed: DeepSeek-V3 MLA weights per layer (DeepSeek-V2 Eq. 12-19) are
W^DQ 7168x1536 + q norm 1536 + W^UQ 1536x(128x192) = 48,760,320; W^DKV+W^KR 7168x576 + kv norm 512 +
W^UK,UV 512x(128x256) = 20,906,496; W^O (128x128)x7168 = 117,440,512; sum 187,107,328.
"""

from __future__ import annotations

import pytest

from topologies.errors import ConfigError
from workloads.graph.op_lists import forward_ops
from workloads.ops import COMM, Gemm
from workloads.recipes.mla import mla_recipe
from workloads.recipes.moe import dense_ffn_recipe, ep_ffn_recipe
from workloads.specs.layouts import layout_preset
from workloads.specs.model_extensions import mla_params
from workloads.specs.models import model_preset

DSV3 = model_preset("deepseek-v3")
DS_LAYOUT = layout_preset("deepseek-v3")


def _gemms(steps) -> dict[str, Gemm]:
    return {s.name: s.gemm for s in steps if s.gemm is not None}


def test_mla_params_hand_computed() -> None:
    assert mla_params(DSV3) == 48_760_320 + 20_906_496 + 117_440_512 == 187_107_328
    assert DSV3.attention_params == 187_107_328


def test_deepseek_v3_total_and_active_params() -> None:
    """DeepSeek-V3 report: 671B total, 37B activated per token (within 3%)."""
    assert DSV3.total_params == pytest.approx(671e9, rel=0.03)
    assert DSV3.active_params == pytest.approx(37e9, rel=0.03)
    expert = 3 * 7168 * 2048
    dense = 187_107_328 + 3 * 7168 * 18432 + 2 * 7168
    moe = 187_107_328 + 257 * expert + 7168 * 256 + 2 * 7168
    assert DSV3.total_params == 3 * dense + 58 * moe + 2 * 129280 * 7168


def test_paper_preset_parameter_count_unchanged() -> None:
    assert model_preset("paper-352b").total_params == 341_290_483_712


def test_tied_embeddings_drop_one_matrix() -> None:
    base = model_preset("deepseekmoe").with_(num_shared_experts=2)
    tied = base.with_(tied_embeddings=True)
    assert base.total_params - tied.total_params == 102400 * 2048
    assert base.active_params - tied.active_params == 102400 * 2048
    assert base.total_params - model_preset("deepseekmoe").total_params == 28 * 2 * 3 * 2048 * 1408


def test_mla_recipe_shapes_no_tp() -> None:
    """TP 1: 4,096 local tokens; flash FLOPs 2 s^2 H (192 + 128) = 2 x 4096^2 x 128 x 320."""
    steps = mla_recipe(DSV3, DS_LAYOUT, 4096)
    g = _gemms(steps)
    assert g["q_down"] == Gemm(4096, 1536, 7168)
    assert g["q_up"] == Gemm(4096, 24576, 1536)
    assert g["kv_down"] == Gemm(4096, 576, 7168)
    assert g["kv_up"] == Gemm(4096, 32768, 512)
    assert g["o_proj"] == Gemm(4096, 7168, 16384)
    (flash,) = [s for s in steps if s.name == "flash_attn"]
    assert flash.flops == 2 * 4096**2 * 128 * 320
    assert not [s for s in steps if s.collective]


def test_mla_recipe_sp8_bytes() -> None:
    """SP 8 over 8,192 tokens: 1,024 local; Q, K (192 each) and V (128) of 128 heads, 7/8 leave."""
    layout = layout_preset("megascale-moe")
    steps = mla_recipe(DSV3, layout, 8192)
    (qkv,) = [s for s in steps if s.name == "sp_a2a_qkv"]
    assert qkv.comm_bytes == 1024 * 128 * (2 * 192 + 128) * 2 * 7 / 8
    assert _gemms(steps)["kv_up"] == Gemm(1024, 32768, 512)


def test_dense_and_shared_expert_shapes() -> None:
    g = _gemms(dense_ffn_recipe(DSV3, DS_LAYOUT, 4096))
    assert g["dense_fc13"] == Gemm(4096, 2 * 18432, 7168)
    assert g["dense_fc2"] == Gemm(4096, 7168, 18432)
    g = _gemms(ep_ffn_recipe(DSV3, DS_LAYOUT, 4096, 8))
    assert g["shared_fc13"] == Gemm(4096, 4096, 7168)
    assert g["shared_fc2"] == Gemm(4096, 7168, 2048)
    # 256 experts over EP 64 = 4 per GPU; dropless (DeepSeek-V3 Sec. 2.1.2): 4,096 x 8 copies / 4 = 8,192 rows
    # each, where a capacity factor of 1.25 pads them to 10,240
    assert g["expert_fc13"] == Gemm(8192, 4096, 7168, 4)
    padded = _gemms(ep_ffn_recipe(DSV3, DS_LAYOUT.with_(dropless=False), 4096, 8))
    assert padded["expert_fc13"] == Gemm(10240, 4096, 7168, 4)


def test_shared_experts_run_beside_the_dispatch() -> None:
    ops = forward_ops([(0, ep_ffn_recipe(DSV3, DS_LAYOUT, 4096, 8))], DS_LAYOUT)
    index = {op.name: i for i, op in enumerate(ops)}
    dispatch = ops[index["ep_a2a_dispatch"]]
    assert dispatch.stream == COMM
    assert ops[index["shared_fc13"]].deps == dispatch.deps
    assert set(ops[index["expert_fc13"]].deps) == {index["shared_fc2"], index["ep_a2a_dispatch"]}


def test_bad_extension_fields() -> None:
    with pytest.raises(ConfigError, match="kv_lora_rank"):
        DSV3.with_(kv_lora_rank=0)
    with pytest.raises(ConfigError, match="num_dense_layers"):
        DSV3.with_(num_dense_layers=61)
    with pytest.raises(ConfigError, match="attention"):
        DSV3.with_(attention="mha")
