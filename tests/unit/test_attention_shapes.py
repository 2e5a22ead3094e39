"""Attention shapes cuDNN's benchmark timed directly (simulator/costs/attention_shapes.py): an op of that shape takes
the measured time at the measured lengths, the table's fall below them, and every other shape keeps the table."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.costs.attention_cost import attention_op_efficiency, measured_ratio
from simulator.costs.attention_shapes import MEASURED_SHAPES, measured_shape
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.generations import kernel_tables
from simulator.costs.kernels import attention_time_s
from topologies.hardware import GPU_PRESETS, GpuGeneration
from workloads.ops import AttentionShape, attention_pairs

# The benchmarks' own conditions: the published kernel speed at its clock, no residual, no launch gap.
BENCH = replace(DEFAULT_CALIBRATION, compute_residual=1.0, sustained_clock_fraction=1.0)


def _time_ms(gpu: str, shape: AttentionShape, batch: int, heads: int, backward: bool) -> float:
    """moesim's time for the benchmark's call: 2 b pairs H (d_qk + d_v) forward FLOPs, 2.5x that backward."""
    flops = 2.0 * batch * attention_pairs(shape.seq_len, shape.window) * heads * (shape.head_dim + shape.head_dim_v)
    flops *= 2.5 if backward else 1.0
    return attention_time_s(flops, backward, GPU_PRESETS[gpu], BENCH, shape, overhead_s=0.0) * 1e3


def test_deepseek_v3_mla_on_gb200_takes_cudnn_s_own_times() -> None:
    """dsv3 on a GB200, batch 2, 128 heads, 4,096 tokens causal: 0.977 ms forward, 3.301 ms deterministic backward;
    FP8 (cuDNN's FP8 attention) 0.656 / 2.108 ms."""
    bf16 = AttentionShape(192, 128, 4096, True, 0, "cudnn")
    assert _time_ms("gb200", bf16, 2, 128, False) == pytest.approx(0.977, rel=1e-9)
    assert _time_ms("gb200", bf16, 2, 128, True) == pytest.approx(3.301, rel=1e-9)
    fp8 = replace(bf16, kernel="cudnn-fp8")
    assert _time_ms("gb200", fp8, 2, 128, False) == pytest.approx(0.656, rel=1e-9)
    assert _time_ms("gb200", fp8, 2, 128, True) == pytest.approx(2.108, rel=1e-9)


def test_every_measured_point_is_reproduced_on_its_own_gpu() -> None:
    for measured in MEASURED_SHAPES:
        for seq_len, fwd_ms, bwd_ms in zip(measured.seq_lens, measured.forward_ms, measured.backward_ms):
            shape = AttentionShape(
                measured.head_dim, measured.head_dim_v, seq_len, True, measured.window, measured.family
            )
            assert _time_ms(measured.gpu, shape, measured.batch, measured.heads, False) == pytest.approx(fwd_ms)
            assert _time_ms(measured.gpu, shape, measured.batch, measured.heads, True) == pytest.approx(bwd_ms)


def test_between_and_beyond_the_measured_lengths_the_ratio_is_interpolated_and_held() -> None:
    """At 6,144 tokens (between 4,096 and 8,192) the correction is the log-midpoint of the two measured ratios; at
    1,024 (below the shortest measured, 2,048) the 2,048 one, so the table's fall to short sequences is kept."""
    measured = measured_shape("cudnn", 192, 128, 0, GpuGeneration.HOPPER)
    assert measured is not None and measured.gpu == "h200"
    at = {s: measured_ratio(measured, True, BENCH, s) for s in (1024, 2048, 4096, 6144, 8192)}
    assert at[1024] == at[2048]
    t = 0.5849625007211562  # log(6144 / 4096) / log(8192 / 4096) = log 1.5 / log 2
    assert at[6144] == pytest.approx(at[4096] + t * (at[8192] - at[4096]))
    # the H200's deterministic MLA backward is slower than the head-width-160 lookup: the ratio is below 1
    assert all(ratio < 1 for ratio in at.values())


def test_other_shapes_keep_the_table() -> None:
    """Head dim 128 (the tables' own), a window no benchmark timed (GPT-OSS's 128 keys on Hopper: only the H200's
    1,024 was), a non-causal MLA op and FlashAttention's families are not corrected."""
    assert measured_shape("cudnn", 128, 128, 0, GpuGeneration.BLACKWELL) is None
    assert measured_shape("cudnn", 64, 64, 128, GpuGeneration.HOPPER) is None
    assert measured_shape("fa3", 192, 128, 0, GpuGeneration.BLACKWELL) is None
    mla = AttentionShape(192, 128, 4096, True, 0, "cudnn")
    causal = attention_op_efficiency(mla, True, BENCH, GpuGeneration.BLACKWELL)
    non_causal = attention_op_efficiency(replace(mla, causal=False), True, BENCH, GpuGeneration.BLACKWELL)
    fa4 = attention_op_efficiency(replace(mla, kernel="fa3"), True, BENCH, GpuGeneration.BLACKWELL)
    table = kernel_tables(GpuGeneration.BLACKWELL).attention
    assert non_causal == table("cudnn", True, False, 160, 4096) and fa4 == table("fa3", True, True, 160, 4096)
    assert causal != pytest.approx(table("cudnn", True, True, 160, 4096))
