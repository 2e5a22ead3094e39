"""The optimizer step's HBM passes (simulator/costs/optimizer_step.py) per parameter, by hand, on the paths
Megatron-Core's distributed optimizer takes."""

from __future__ import annotations

import pytest

from simulator.costs.optimizer_step import decoupled_gradients, optimizer_step_s, shard_bytes_per_param
from tests.toys import megatron_field, toy_calibration, toy_gpu
from workloads.specs.layouts import LayoutSpec


def test_fp8_weights_with_bf16_gradients() -> None:
    """Megatron-Bridge's FP8 recipes (--grad-reduce-in-bf16 --fp8-param-gather, no precision-aware optimizer):
    BF16 gradient to FP32 (2 + 4), norm (4) and clip (4 + 4), Adam on FP32 master, m, v (4 + 2 x 12), the
    master read for its amax and again for the FP8 cast (4 + 4 + 1): 55 B in 1 + 3 + 2 passes."""
    layout = LayoutSpec("t", main_grads_dtype="bf16", gemm_dtype="fp8", fp8_recipe="tensorwise", fp8_param_gather=True)
    assert not decoupled_gradients(layout)
    assert shard_bytes_per_param(layout) == (55, 6)


def test_fp32_gradients_need_no_copy() -> None:
    """FP32 gradient buffers: ``.float()`` returns them as they are; the weights go back as BF16 (4 + 2)."""
    assert shard_bytes_per_param(LayoutSpec("t", main_grads_dtype="fp32")) == (4 + 8 + 28 + 6, 4)


def test_precision_aware_with_remainders() -> None:
    """--use-precision-aware-optimizer in BF16 (TE FusedAdam, store_param_remainders): the BF16 gradient read in
    place for the norm (2), the clip (2 + 2) and Adam (2); the BF16 weight and its int16 remainder read and
    written (8); FP32 m and v read and written (16): 32 B in 3 passes. BF16 moments halve the last term."""
    layout = LayoutSpec("t", main_grads_dtype="bf16", param_remainders=True)
    assert decoupled_gradients(layout)
    assert shard_bytes_per_param(layout) == (32, 3)
    assert shard_bytes_per_param(layout.with_(exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16"))[0] == 24


def test_bf16_weights_stepped_in_place() -> None:
    """No master copy (main_params_dtype none: PyTorch-native BF16 training, NeMo AutoModel's): the BF16 gradient for the
    norm (2), the clip (2 + 2) and Adam (2); the BF16 weight read and written (4); BF16 m and v read and written (8):
    20 B in 3 passes; TE FusedAdam's FP32 moments (16) make it 28."""
    layout = LayoutSpec("t", main_grads_dtype="bf16", main_params_dtype="none", exp_avg_dtype="bf16")
    assert decoupled_gradients(layout)
    assert shard_bytes_per_param(layout.with_(exp_avg_sq_dtype="bf16")) == (20, 3)
    assert shard_bytes_per_param(layout.with_(exp_avg_dtype="fp32")) == (28, 3)


def test_megatron_flags_pick_the_path() -> None:
    """The Megatron-LM arguments reach the decoupled path only as Megatron-Core's
    use_precision_aware_optimizer_no_fp8_or_ds_fp8 does: BF16 without FP8 current scaling."""
    bf16 = "--bf16 --use-distributed-optimizer --grad-reduce-in-bf16 --use-precision-aware-optimizer"
    assert megatron_field(bf16, "param_remainders")
    fp8 = f"{bf16} --fp8-format hybrid --fp8-recipe tensorwise"
    assert not megatron_field(fp8, "param_remainders")


def test_step_time_by_hand() -> None:
    """1e9 parameters held, 2.5e8 in the shard, the FP8 path: 55 x 2.5e8 B plus the BF16 gradient buffer zeroed
    (2 x 1e9 B) at the toy GPU's HBM rate, and 7 launches."""
    gpu, cal = toy_gpu(), toy_calibration()
    layout = LayoutSpec("t", main_grads_dtype="bf16", gemm_dtype="fp8", fp8_recipe="tensorwise", fp8_param_gather=True)
    by_hand = (55 * 2.5e8 + 2 * 1e9) / (gpu.hbm_bandwidth_Bps * cal.memory_efficiency) + 7 * cal.kernel_overhead_s
    assert optimizer_step_s(layout, 2.5e8, 1e9, gpu, cal) == pytest.approx(by_hand, rel=1e-12)
