"""GPT-OSS in Megatron-Core: the clamped SwiGLU and biased FC2 of TEGroupedMLP (workloads/recipes/expert_kernels.py) and the
unfused YaRN RoPE (workloads/recipes/layers.py): kernels and bytes counted by hand, the recipe unchanged without them,
and the time they add on a toy GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.toys import toy_calibration, toy_task_s
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.inputs.yaml_files import load_model
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
# 8 experts of width 512, hidden 1,024, top-2; one GPU holds all 8 experts and the 1,024 tokens: 2,048 rows
# (capacity factor 1: no padded rows).
PLAIN = ModelSpec("m", 1, 1024, 8, 8, 512, 8, 2, 64)
OSS = PLAIN.with_(expert_act_clamp=7.0, expert_bias=True)
SEQ = 1024
LAYOUT = LayoutSpec(
    "t",
    attention="tp",
    intra_size=1,
    ffn="ep",
    intra_op_overlap=False,
    inter_op_overlap=False,
    recompute="none",
    capacity_factor=1.0,
)
NEW = ("act_clamp", "expert_fc2_bias")


def _steps(model: ModelSpec):
    return layer_recipe(model, LAYOUT, SEQ, 8)


def test_gpt_oss_config_reads_the_clamp_and_the_bias() -> None:
    """HF gpt-oss-120b: swiglu_limit 7.0 and biased experts; a Mixtral-style config has neither."""
    model = load_model(MODELS / "gpt-oss-120b.json")
    assert (model.expert_act_clamp, model.expert_bias) == (7.0, True)
    assert (PLAIN.expert_act_clamp, PLAIN.expert_bias) == (0.0, False)


def test_kernels_and_bytes_by_hand() -> None:
    """2,048 rows. Clamp: a half is 2,048 x 512 x 2 B = 2,097,152 B; two clamps read and write a half each and
    the cat reads and writes both: 8 halves = 16,777,216 B in 3 kernels; backward two masks (grad, input in,
    grad out: 6 halves) and the cat of the halves' gradients (4 halves) = 20,971,520 B in 3 kernels.
    FC2 bias: the output is 2,048 x 1,024 x 2 B = 4,194,304 B; b * p writes it once, t + b p reads it twice
    and writes it once, the cat reads and writes it: 6 x = 25,165,824 B in 8 x 2 + 1 = 17 kernels; backward
    two products and two sums per expert, 6 x in 8 x 4 + 1 = 33 kernels."""
    steps = [(0, _steps(OSS))]
    fwd, bwd = forward_ops(steps, LAYOUT), backward_ops(steps, LAYOUT)
    assert {op.name: (op.kernels, op.mem_bytes) for op in fwd if op.name in NEW} == {
        "act_clamp": (3, 16_777_216),
        "expert_fc2_bias": (17, 25_165_824),
    }
    back = {op.name: (op.kernels, op.mem_bytes) for op in bwd if op.name in (f"{n}.bwd" for n in NEW)}
    assert back == {"act_clamp.bwd": (3, 20_971_520), "expert_fc2_bias.bwd": (33, 25_165_824)}


def test_order_and_differential() -> None:
    """The clamp sits between FC1 and the activation, the bias right after FC2; without the fields the recipe
    is the former one exactly."""
    names = [s.name for s in _steps(OSS)]
    assert names[names.index("expert_fc13") + 1 : names.index("expert_fc13") + 3] == ["act_clamp", "swiglu"]
    assert names[names.index("expert_fc2") + 1] == "expert_fc2_bias"
    assert [s for s in _steps(OSS) if s.name not in NEW] == _steps(PLAIN)
    assert _steps(PLAIN.with_(expert_act_clamp=7.0)) == [s for s in _steps(OSS) if s.name != "expert_fc2_bias"]


def test_clamp_recomputed_with_moe_act() -> None:
    """--recompute-modules moe_act re-runs the clamp with the activation (both inside bias_act_func's checkpoint);
    the FC2 bias, outside it, is not re-run."""
    layout = LAYOUT.with_(recompute="selective", recompute_modules=("moe_act",))
    bwd = backward_ops([(0, _steps(OSS))], layout)
    recomputed = {op.name for op in bwd if op.name.endswith(".recompute")}
    assert {"act_clamp.recompute", "swiglu.recompute"} <= recomputed
    assert "expert_fc2_bias.recompute" not in recomputed


def _forward_s(model: ModelSpec) -> float:
    """One layer's forward on the toy GPU (1e12 B/s HBM, 1 us per kernel on the GPU, no host cost)."""
    cal = toy_calibration(host_launch_s=0.0, kernel_overhead_s=1e-6)
    return toy_task_s(tuple(forward_ops([(0, _steps(model))], LAYOUT)), cal)


def test_gpu_time_added_by_hand() -> None:
    """The forward grows by the new kernels' GPU time: 20 x 1 us + (16,777,216 + 25,165,824) B / 1e12 B/s."""
    added = _forward_s(OSS) - _forward_s(PLAIN)
    assert added == pytest.approx(20e-6 + (16_777_216 + 25_165_824) / 1e12, rel=1e-9)


def test_gpt_oss_rope_unfused_by_hand() -> None:
    """YaRN's concentration factor makes Megatron-Core apply RoPE unfused. Head dim 128, q and k 1,024 wide each,
    1,024 positions: 2,097,152 elements and 131,072 angles. Forward 24 B per element plus cos and sin in each of
    the two calls (22 B per angle each) = 50,331,648 + 11,534,336 B in 2 x (6 + 6) kernels; backward 26 B per element = 54,525,952 B in
    2 x 7 kernels. Without the flag: the fused kernel of q and of k, and the rest of the recipe unchanged."""
    assert load_model(MODELS / "gpt-oss-120b.json").rope_unfused
    fused_model = PLAIN.with_(rope=True)
    unfused_model = fused_model.with_(rope_unfused=True)
    steps = [(0, _steps(unfused_model))]
    (fwd,) = [op for op in forward_ops(steps, LAYOUT) if op.name == "rope"]
    (bwd,) = [op for op in backward_ops(steps, LAYOUT) if op.name == "rope.bwd"]
    assert (fwd.kernels, fwd.mem_bytes, bwd.kernels, bwd.mem_bytes) == (24, 61_865_984, 14, 54_525_952)
    fused = _steps(fused_model)
    assert [s.kernels for s in fused if s.name == "rope"] == [2]
    assert [s for s in fused if s.name != "rope"] == [s for s in _steps(unfused_model) if s.name != "rope"]
