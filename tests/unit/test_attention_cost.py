"""Attention looked up per op (simulator.costs.attention_cost): shapes carried by ops, windows, MLA, by hand."""

from __future__ import annotations

import pytest

from simulator.costs.attention_cost import (
    attention_op_efficiency,
    effective_seq_len,
    executed_fraction,
    window_key_blocks,
)
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.gemm_efficiency import HOPPER_GEMM_TABLE, attention_efficiency
from simulator.costs.kernels import attention_time_s, compute_time_s
from tests.toys import megatron_field, toy_calibration, toy_gpu
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.ops import ATTENTION, AttentionShape, attention_pairs
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec, model_preset

# The published table, no residual, no launch gap: a time maps straight back to TFLOP/s on the toy GPU.
CAL = toy_calibration(gemm_efficiency=HOPPER_GEMM_TABLE, attention_fwd_efficiency=None, attention_bwd_efficiency=None)
GPU = toy_gpu()  # 100 TFLOP/s BF16


def test_window_key_blocks_by_hand() -> None:
    """s = 512 in 4 query blocks of 128, window 200: block 0 needs keys 0..127 (1 key block); block 1 keys
    0..255 (2); block 2 keys 57..383 (blocks 0-2: 3); block 3 keys 185..511 (blocks 1-3: 3): 9 in all.
    Window 128: 1 + 2 + 2 + 2 = 7."""
    assert window_key_blocks(512, 200, 128) == 9
    assert window_key_blocks(512, 128, 128) == 7


def test_executed_fraction_by_hand() -> None:
    """Full causal: FA's half. Window 200 over 512: 9 tiles x 128^2 = 147,456 pairs executed against
    attention_pairs = 2 x 512 x 200 - 200^2 = 164,800 counted. Window 128 = tile: (2 n - 1) tiles equal the
    2 s w - w^2 counted pairs exactly (the kernel computes twice the s w - w^2 / 2 pairs it keeps)."""
    cal = DEFAULT_CALIBRATION
    assert executed_fraction(AttentionShape(128, 128, 8192), cal) == 0.5
    assert executed_fraction(AttentionShape(128, 128, 8192, causal=False), cal) == 1.0
    assert executed_fraction(AttentionShape(64, 64, 512, window=200), cal) == pytest.approx(147456 / 164800)
    assert attention_pairs(4096, 128) == 63 * 128 * 128
    assert executed_fraction(AttentionShape(64, 64, 4096, window=128), cal) == 1.0
    assert executed_fraction(AttentionShape(64, 64, 128, window=128), cal) == 0.5  # window >= s: causal


def test_short_window_efficiency_extrapolates_the_two_shortest_points() -> None:
    """GPT-OSS's 128-key window over 4,096 tokens walks 63 key blocks over 32 query blocks: an effective
    non-causal length of 63 / 32 x 128 = 252. FA3 forward, non-causal, head dim 64 (Fig. 5): 333 TFLOP/s at
    512, 392 at 1,024; 1 / T = a + b / s through both, at 252."""
    shape = AttentionShape(64, 64, 4096, window=128)
    assert effective_seq_len(shape, CAL) == 252.0
    b = (1 / 333 - 1 / 392) / (1 / 512 - 1 / 1024)
    tflops = 1 / (1 / 392 + b * (1 / 252 - 1 / 1024))
    assert attention_op_efficiency(shape, False, CAL) == pytest.approx(tflops * 1e12 / 989e12, rel=1e-12)
    assert tflops < 333  # below the shortest published point, not flat at it


def test_per_op_lookup_by_hand() -> None:
    """Head dim 128, causal, 4,096 tokens (Qwen3-30B-A3B): FA3 forward 579 TFLOP/s (Fig. 5), not the 602 of
    the former fixed 8k point; 1e12 counted FLOPs execute 0.5e12 at 579 / 989 of the toy's 100 TFLOP/s."""
    shape = AttentionShape(128, 128, 4096)
    assert attention_time_s(1e12, False, GPU, CAL, shape) == pytest.approx(0.5e12 / (100e12 * 579 / 989), rel=1e-12)


def test_mla_looked_up_at_its_mean_head_width() -> None:
    """MLA 192 / 128: the width with the same FLOPs per pair, 160, between the published 128 and 256."""
    mla = AttentionShape(192, 128, 4096)
    assert attention_op_efficiency(mla, False, CAL) == attention_efficiency("fa3", False, True, 160, 4096)
    assert attention_efficiency("fa3", False, True, 128, 4096) < attention_op_efficiency(mla, False, CAL)


def _gpt_oss(window_layers: tuple[int, ...]) -> ModelSpec:
    base = ModelSpec("oss", 2, 2880, 64, 8, 2880, 32, 4, 64, kv_channels=64)
    return ModelSpec(**{**base.__dict__, "sliding_window": 128, "window_layers": window_layers})


def test_recipes_carry_the_kernel_shape_after_cp() -> None:
    """Attention steps carry head dims, the per-GPU sequence after the CP split and the window; MLA its
    192 / 128 widths."""
    layout = LayoutSpec("t", intra_size=1, ffn="ep", cp=2)
    steps = layer_recipe(_gpt_oss((0,)), layout, 8192, 8, window=128)
    (flash,) = [s for s in steps if s.kind == ATTENTION]
    assert flash.attention == AttentionShape(64, 64, 4096, causal=True, window=128)
    steps = layer_recipe(model_preset("deepseek-v3"), LayoutSpec("t", intra_size=8, ffn="ep"), 4096, 8)
    (flash,) = [s for s in steps if s.kind == ATTENTION]
    assert flash.attention == AttentionShape(192, 128, 4096)


def test_window_on_off_difference_is_the_sum_of_the_attention_ops() -> None:
    """Differential: one layer, forward and backward ops, with and without its 128-key window. The ops
    other than attention are the same, so the compute times differ by exactly the attention ops' hand
    times: executed FLOPs / (peak x table efficiency at the op's shape)."""
    layout = LayoutSpec("t", intra_size=1, ffn="ep")

    def ops(window: int) -> list:
        steps = layer_recipe(_gpt_oss((0,) if window else ()), layout, 4096, 8, window=window)
        return forward_ops([(0, steps)], layout) + backward_ops([(0, steps)], layout)

    def total(op_list: list) -> float:
        return sum(compute_time_s(op, GPU, CAL) for op in op_list)

    windowed, full = ops(128), ops(0)
    attention = [(w, f) for w, f in zip(windowed, full) if w.kind == ATTENTION]
    assert len(attention) == 2
    expected = 0.0
    for w, f in attention:
        bwd = w.attention_backward
        t_window = w.flops * 1.0 / (100e12 * attention_op_efficiency(w.attention, bwd, CAL))  # fraction 1 at w = 128
        t_full = f.flops * 0.5 / (100e12 * attention_efficiency("fa3", bwd, True, 64, 4096))
        expected += t_window - t_full
    assert total(windowed) - total(full) == pytest.approx(expected, rel=1e-9)
    assert expected < 0  # the window executes 63 of 528 causal tiles


def test_cudnn_family_by_hand() -> None:
    """cuDNN 9.19 on an H200 at head dim 128 and 4,096 tokens (cudnn-frontend's SDPA benchmark): forward 671
    non-causal and 591 causal; backward 560 non-causal, and causal backward = 560 x the forward's causal / non-causal
    ratio, 591 / 671 (measured: 474); head dim 64 the FA3 paper's cuDNN bar, 417, by head dim 128's measured / paper
    ratio at that length, 560 / 499. Below 2,048 tokens the paper's bars: 574 non-causal forward at 1,024."""
    assert attention_efficiency("cudnn", False, False, 128, 4096) == pytest.approx(671 / 989, rel=1e-12)
    assert attention_efficiency("cudnn", False, True, 128, 4096) == pytest.approx(591 / 989, rel=1e-12)
    assert attention_efficiency("cudnn", True, True, 128, 4096) == pytest.approx(560 * 591 / 671 / 989, rel=1e-12)
    assert attention_efficiency("cudnn", True, False, 64, 4096) == pytest.approx(417 * 560 / 499 / 989, rel=1e-12)
    assert attention_efficiency("cudnn", False, False, 128, 1024) == pytest.approx(574 / 989, rel=1e-12)


def test_op_kernel_overrides_the_calibration_family() -> None:
    """An op whose shape names cuDNN is timed at cuDNN's table whatever the calibration's family; an op that names
    none at the calibration's (FA3), exactly as one that names fa3. Causal head dim 128 at 4,096, 1e12 counted
    FLOPs: 0.5e12 executed at 591 (cuDNN) and 579 (FA3) of 989 x the toy's 100 TFLOP/s."""
    cudnn = AttentionShape(128, 128, 4096, kernel="cudnn")
    plain, fa3 = AttentionShape(128, 128, 4096), AttentionShape(128, 128, 4096, kernel="fa3")
    assert attention_time_s(1e12, False, GPU, CAL, cudnn) == pytest.approx(0.5e12 / (100e12 * 591 / 989), rel=1e-12)
    assert attention_time_s(1e12, False, GPU, CAL, plain) == attention_time_s(1e12, False, GPU, CAL, fa3)
    assert attention_time_s(1e12, False, GPU, CAL.with_(attention_kernel="fa2"), cudnn) == attention_time_s(
        1e12, False, GPU, CAL, cudnn
    )


def test_layout_backend_reaches_every_attention_op() -> None:
    """layout.attention_backend is carried by the GQA and the MLA attention steps; the rest of the recipe is
    unchanged."""
    for model, n in ((_gpt_oss(()), 1), (model_preset("deepseek-v3"), 8)):
        base = LayoutSpec("t", intra_size=n, ffn="ep")
        plain, cudnn = (
            layer_recipe(model, base, 4096, 8),
            layer_recipe(model, base.with_(attention_backend="cudnn"), 4096, 8),
        )
        assert [s.attention.kernel for s in cudnn if s.kind == ATTENTION] == ["cudnn"]
        assert [s for s in cudnn if s.kind != ATTENTION] == [s for s in plain if s.kind != ATTENTION]


@pytest.mark.parametrize(
    "flags, backend",
    [
        ("", "cudnn"),  # Megatron-Core's defaults: TE layers, attention_backend auto
        ("--attention-backend fused", "cudnn"),
        ("--attention-backend auto --transformer-impl transformer_engine", "cudnn"),
        ("--attention-backend flash", ""),
        ("--transformer-impl local", "unfused"),  # Megatron-Core's DotProductAttention
    ],
)
def test_megatron_flags(flags: str, backend: str) -> None:
    """TE runs cuDNN's fused attention on Hopper+ unless FlashAttention is asked for; local layers run Megatron-Core's
    unfused DotProductAttention."""
    assert megatron_field(f"--micro-batch-size 1 {flags}", "attention_backend") == backend
