"""Kernel efficiency tables (simulator.gemm_efficiency): published points come back, interpolation by hand."""

from __future__ import annotations

import math

import pytest

from simulator.costs import attention_time_s, gemm_time_s
from simulator.gemm_efficiency import (
    HOPPER_GEMM_TABLE,
    GemmEfficiencyTable,
    attention_efficiency,
    interpolate_log,
    wave_fraction,
)
from tests.toys import toy_calibration, toy_gpu
from topologies.hardware import gpu_preset
from workloads.ops import AttentionShape, Gemm

H800 = gpu_preset("h800")
# The real table, no residual and no launch gap, so that a time maps straight back to TFLOP/s.
BARE = toy_calibration(gemm_efficiency=HOPPER_GEMM_TABLE, memory_efficiency=0.8, compute_residual=1.0)


def test_wave_fraction_by_hand() -> None:
    """4096 x 7168: 32 x 56 = 1,792 tiles on 132 SMs -> 14 waves; useful share 1792 / (14 * 132) = 0.9697."""
    assert wave_fraction(4096, 7168) == pytest.approx(1792 / 1848, rel=1e-12)
    # 2112 columns: 17 tile columns, the last half empty -> 544 tiles, 5 waves; share 4096*2112 / (5*132*128^2)
    assert wave_fraction(4096, 2112) == pytest.approx(4096 * 2112 / (5 * 132 * 128 * 128), rel=1e-12)


def test_published_fp8_point_returns_its_tflops() -> None:
    """DeepGEMM H800 FP8 4096 x 7168 x 16384 = 1,358 TFLOP/s, the only point at K = 16384: the simulated
    GEMM (compute-bound: 14 waves) runs at exactly that rate."""
    efficiency = 1358e12 / 1979e12 / (1792 / 1848)  # 0.70765
    assert HOPPER_GEMM_TABLE.tile_efficiency(16384, fp8=True) == pytest.approx(efficiency, rel=1e-12)
    gemm = Gemm(4096, 7168, 16384, fp8=True)
    assert gemm.flops / gemm_time_s(gemm, H800, BARE) == pytest.approx(1358e12, rel=1e-9)


def test_published_bf16_point_returns_its_tflops() -> None:
    """MAMF H100 SXM BF16 2048 x 2048 x 13312 = 794.5 TFLOP/s (256 tiles -> 2 waves, share 256 / 264)."""
    gemm = Gemm(2048, 2048, 13312)
    assert HOPPER_GEMM_TABLE.tile_efficiency(13312, fp8=False) == pytest.approx(794.5 / 989 / (256 / 264), rel=1e-12)
    assert gemm.flops / gemm_time_s(gemm, H800, BARE) == pytest.approx(794.5e12, rel=1e-9)


def test_interpolation_is_linear_in_log_k_and_flat_outside() -> None:
    """Between (1000, 0.4) and (4000, 0.8): K = 2000 is half way in log K -> 0.6; beyond the ends, flat."""
    points = ((1000.0, 0.4), (4000.0, 0.8))
    assert interpolate_log(points, 2000) == pytest.approx(0.6, rel=1e-12)
    assert interpolate_log(points, 500) == 0.4
    assert interpolate_log(points, 9000) == 0.8


def test_toy_table_gemm_by_hand() -> None:
    """Toy table BF16 (1000, 0.5) - (4000, 1.0): K = 2000 -> 0.75. Gemm 1280 x 1280 x 2000 on the toy GPU
    (100 SMs at 1e12 FLOP/s) is one wave of 2*128*128*2000 = 65.536 MFLOP tiles at 0.75e12 -> 87.381 us."""
    table = GemmEfficiencyTable(((1000.0, 0.5), (4000.0, 1.0)), ((1000.0, 1.0),))
    cal = toy_calibration(gemm_efficiency=table)
    assert gemm_time_s(Gemm(1280, 1280, 2000), toy_gpu(), cal) == pytest.approx(65.536e6 / 0.75e12, rel=1e-12)


def test_fp8_over_bf16_comes_from_the_tables_not_2x() -> None:
    """4096 x 4096 x 7168 on the H800: FP8 / BF16 speed = (1979 / 989) x eff_fp8(7168) / eff_bf16(7168), ~1.6."""
    bf16 = gemm_time_s(Gemm(4096, 4096, 7168), H800, BARE)
    fp8 = gemm_time_s(Gemm(4096, 4096, 7168, fp8=True), H800, BARE)
    expected = (
        1979 / 989 * HOPPER_GEMM_TABLE.tile_efficiency(7168, True) / HOPPER_GEMM_TABLE.tile_efficiency(7168, False)
    )
    assert bf16 / fp8 == pytest.approx(expected, rel=1e-9)
    assert 1.3 < bf16 / fp8 < 1.9


def test_efficiency_rises_with_k_and_rows_per_group() -> None:
    """Short reductions amortize less of the per-tile cost; grouped GEMMs with few rows per group lose more."""
    for fp8 in (False, True):
        effs = [HOPPER_GEMM_TABLE.tile_efficiency(k, fp8) for k in (256, 512, 1024, 2048, 4096, 8192, 16384)]
        assert effs == sorted(effs)
    factors = [HOPPER_GEMM_TABLE.tile_efficiency(7168, True, rows) for rows in (128, 256, 512, 1024, 4096, 8192)]
    assert factors == sorted(factors)
    assert factors[-1] == HOPPER_GEMM_TABLE.tile_efficiency(7168, True)  # 4096+ rows: the contiguous curve


def test_attention_published_points() -> None:
    """FA3 paper Fig. 5, head dim 128, causal, 8k: 602 TFLOP/s of 989; FA2 333; the alternative family."""
    assert attention_efficiency("fa3", False, True, 128, 8192) == pytest.approx(602 / 989, rel=1e-12)
    assert attention_efficiency("fa2", False, True, 128, 8192) == pytest.approx(333 / 989, rel=1e-12)
    assert attention_efficiency("fa3", True, False, 128, 16384) == pytest.approx(561 / 989, rel=1e-12)


def test_attention_interpolation_by_hand() -> None:
    """Half way in log between 4k (638) and 8k (646), FA3 forward non-causal head dim 128: 642; half way in
    log head dim between 128 (646) and 256 (746) at 8k: 696. Causal backward (not published) = backward
    non-causal x forward causal / non-causal: 559 x 602 / 646."""
    assert attention_efficiency("fa3", False, False, 128, 4096 * math.sqrt(2)) == pytest.approx(642 / 989, rel=1e-12)
    assert attention_efficiency("fa3", False, False, 128 * math.sqrt(2), 8192) == pytest.approx(696 / 989, rel=1e-12)
    assert attention_efficiency("fa3", True, True, 128, 8192) == pytest.approx(559 * 602 / 646 / 989, rel=1e-12)


def test_attention_time_uses_the_table_and_the_residual() -> None:
    """1e12 counted FLOPs, causal half, head dim 128 at 8k: 0.5e12 / (100e12 x 602/989 x 0.5 residual)."""
    cal = toy_calibration(attention_fwd_efficiency=None, compute_residual=0.5)
    shape = AttentionShape(128, 128, 8192)
    assert attention_time_s(1e12, False, toy_gpu(), cal, shape) == pytest.approx(
        0.5e12 / (100e12 * 602 / 989 * 0.5), rel=1e-12
    )
    with pytest.raises(ValueError):
        attention_efficiency("fa1", False, True, 128, 8192)
