"""DeepSeek-V3's low-precision activation storage (layout.fp8_activation_cache; arXiv 2412.19437 Sec. 3.3.3): the
attention output kept once in E5M6, the experts' SwiGLU input in FP8 with its output recomputed; by hand, and the
report's own pre-training setup fitting in an H800's 80 GB only with it."""

from __future__ import annotations

import pytest

from simulator.memory.activations import BYTES_E5M6, layer_saved, megatron_layer_bytes
from simulator.memory.per_gpu import megascale_formula, peak_memory
from topologies.errors import ConfigError
from topologies.hardware import gpu_preset
from workloads.graph.step import StepWorkload
from workloads.inputs.yaml_files import load_model
from workloads.specs.layouts import layout_preset

DSV3 = load_model("examples/models/deepseek-v3.json")
# The report's recipe: DualPipe over PP 16, EP 64, ZeRO-1, FP8 GEMMs, dropless (Sec. 2.1.2), recomputing RMSNorm
# and the MLA up-projections (Sec. 3.2.3) and the experts' SwiGLU output, BF16 Adam moments (Sec. 3.3.3).
RECIPE = layout_preset("deepseek-v3").with_(
    schedule="dualpipe",
    ep_overlap=True,
    dropless=True,
    recompute="selective",
    recompute_modules=("layernorm", "mla_up_proj", "moe_act"),
    exp_avg_dtype="bf16",
    exp_avg_sq_dtype="bf16",
    block_layers=(4,) * 15 + (1,),
)


def _saved(layout) -> dict[str, float]:
    return {s.name: s.bytes_per_token for s in layer_saved(DSV3, layout, dense=False)}


def test_the_two_tensors_by_hand() -> None:
    """Per token of a DeepSeek-V3 MoE layer (128 heads x 128 value width = 16,384; top-8 experts of 2,048): O in
    BF16 (2 B) plus TE's FP8 copy (1 B) becomes one E5M6 copy (1.5 B); the SwiGLU input 8 x 2 x 2,048 drops
    from 2 B to 1 B per element."""
    off, on = _saved(RECIPE), _saved(RECIPE.with_(fp8_activation_cache=True))
    v = 128 * 128
    assert off["attn_out"] == 2 * v and off["out_proj_input_fp8"] == v
    assert on["attn_out_e5m6"] == BYTES_E5M6 * v == 1.5 * v and "attn_out" not in on and "out_proj_input_fp8" not in on
    assert off["expert_fc1_output"] == 8 * 2 * 2048 * 2 and on["expert_fc1_output"] == 8 * 2 * 2048
    tokens = 4096  # micro-batch 1 x 4,096, no TP, no CP
    saved = tokens * (3 * v - 1.5 * v + 8 * 2 * 2048)
    before = megatron_layer_bytes(DSV3, RECIPE, 4096, dense=False)
    after = megatron_layer_bytes(DSV3, RECIPE.with_(fp8_activation_cache=True), 4096, dense=False)
    assert before - after == saved


def test_counted_tensor_by_tensor() -> None:
    """The deepseek-v3 layout runs MegaScale-MoE's SP attention at width 1, so its activations come from the
    paper's closed form, which knows nothing of the cache: with the cache they are counted tensor by tensor."""
    assert megascale_formula(RECIPE) and not megascale_formula(RECIPE.with_(fp8_activation_cache=True))


@pytest.mark.parametrize(
    "changes",
    [{"gemm_dtype": "bf16", "comm_dtype": "bf16"}, {"recompute_modules": ("layernorm", "mla_up_proj")}],
)
def test_needs_fp8_training_and_the_swiglu_recompute(changes: dict) -> None:
    with pytest.raises(ConfigError) as error:
        RECIPE.with_(fp8_activation_cache=True, **changes)
    assert error.value.field == "layout.fp8_activation_cache"


@pytest.mark.xfail(
    strict=True,
    reason="since the head's logits and the MTP depth are counted (BF16 logits: DeepSeek-V3's loss is not published) "
    "the report's recipe comes to 82.6 GB with the cache, 3% over the 80 GB it ran in: moesim's DeepSeek-V3 "
    "activations are that much high, or its stack holds less (docs/limits.md)",
)
def test_the_report_s_pretraining_fits_only_with_it() -> None:
    """2,048 H800s, batch 15,360 x 4,096 (Sec. 4.2): over the 80 GB without the cache, within it with the cache."""
    hbm = gpu_preset("h800").hbm_bytes

    def peak(layout) -> float:
        return peak_memory(StepWorkload(DSV3, layout, 2048, 8, 15360, 4096)).total_bytes

    without = RECIPE.with_(attention="tp")  # counted tensor by tensor too, as above
    assert peak(without) > hbm > peak(RECIPE.with_(fp8_activation_cache=True))
