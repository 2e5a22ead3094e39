"""Kernel efficiency tables (simulator.costs.gemm_efficiency): published points come back, interpolation by hand."""

from __future__ import annotations

import math

import pytest

from simulator.costs.gemm_efficiency import (
    HOPPER_GEMM_TABLE,
    GemmEfficiencyTable,
    KernelCurve,
    attention_efficiency,
    interpolate_log,
    monotone_mean,
    wave_fraction,
)
from simulator.costs.gemm_points import GEMM_POINTS, GemmKernel
from simulator.costs.kernels import attention_time_s, gemm_time_s
from tests.toys import toy_calibration, toy_gpu
from topologies.hardware import gpu_preset
from workloads.ops import AttentionShape, Gemm, GemmPrecision
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

H800 = gpu_preset("h800")
# The real table, no residual and no launch gap, so that a time maps straight back to TFLOP/s.
BARE = toy_calibration(gemm_efficiency=HOPPER_GEMM_TABLE, memory_efficiency=0.8, compute_residual=1.0)
BF16, TENSORWISE, BLOCKWISE = GemmPrecision.BF16, GemmPrecision.FP8_TENSORWISE, GemmPrecision.FP8_BLOCKWISE
PRECISIONS = tuple(p for p in GemmPrecision if p != GemmPrecision.NVFP4)  # Hopper's table: NVFP4 is Blackwell-only
WAVES_32_33 = 32 / 33  # 2048^2 (256 tiles, 2 waves), 4096^2 (1024, 8), 8192^2 (4096, 32): 33 tiles' room of 32


def tflops(gemm: Gemm) -> float:
    return gemm.flops / gemm_time_s(gemm, H800, BARE) / 1e12


def test_wave_fraction_by_hand() -> None:
    """4096 x 7168: 32 x 56 = 1,792 tiles on 132 SMs -> 14 waves; useful share 1792 / (14 * 132) = 0.9697."""
    assert wave_fraction(4096, 7168) == pytest.approx(1792 / 1848, rel=1e-12)
    # 2112 columns: 17 tile columns, the last half empty -> 544 tiles, 5 waves; share 4096*2112 / (5*132*128^2)
    assert wave_fraction(4096, 2112) == pytest.approx(4096 * 2112 / (5 * 132 * 128 * 128), rel=1e-12)
    # 16 groups of 1040 rows: 9 row tiles (the last 1/8 full) x 64 x 16 = 9,216 tiles -> 70 waves
    assert wave_fraction(1040, 8192, 16) == pytest.approx(16640 * 8192 / (70 * 132 * 128 * 128), rel=1e-12)


def test_published_fp8_blockwise_point_returns_its_tflops() -> None:
    """DeepGEMM H800 FP8 4096 x 7168 x 16384 = 1,358 TFLOP/s, the only point at K = 16384: the simulated
    GEMM (compute-bound: 14 waves) runs at exactly that rate."""
    efficiency = 1358e12 / 1979e12 / (1792 / 1848)  # 0.70765
    assert HOPPER_GEMM_TABLE.tile_efficiency(16384, BLOCKWISE) == pytest.approx(efficiency, rel=1e-12)
    assert tflops(Gemm(4096, 7168, 16384, precision=BLOCKWISE)) == pytest.approx(1358, rel=1e-9)


def test_published_bf16_dense_points_return_their_tflops() -> None:
    """cuBLAS BF16 on H100 SXM: 2048^3 at 676.59 and 4096^3 at 788.72 TFLOP/s come back exactly. 8192^3
    (797.51, K = 8192) and MAMF's 2048 x 2048 x 13312 (794.5) are out of order in K, so the monotone
    curve pools them: both at (797.51 + 794.5) / 2 = 796.005, as both have the same 32/33 wave share."""
    assert tflops(Gemm(2048, 2048, 2048)) == pytest.approx(676.59, rel=1e-9)
    assert tflops(Gemm(4096, 4096, 4096)) == pytest.approx(788.72, rel=1e-9)
    assert tflops(Gemm(8192, 8192, 8192)) == pytest.approx(796.005, rel=1e-9)
    assert tflops(Gemm(2048, 2048, 13312)) == pytest.approx(796.005, rel=1e-9)
    assert HOPPER_GEMM_TABLE.tile_efficiency(4096, BF16) == pytest.approx(788.72 / 989 / WAVES_32_33, rel=1e-12)


def _dense_bf16(k: float) -> float:
    """The BF16 dense curve by hand between 4096 (788.72) and 8192 (796.005 pooled), in log K."""
    low, high = 788.72 / 989 / WAVES_32_33, 796.005 / 989 / WAVES_32_33
    return low + math.log(k / 4096) / math.log(2) * (high - low)


def test_published_bf16_grouped_points_return_their_tflops() -> None:
    """torch._grouped_mm on H100, 16 groups (pytorch/ao #2490, #2756). Each point's rows factor is its tile
    efficiency over the dense curve at its K; the two points of each rows-per-group value share the mean,
    so each comes back at measured x mean / own factor (their spread at equal rows: 3% at 512, 4% at 1040)."""
    points = {
        512: (
            (8192, 5120, 2 * 8192 * 8192 * 5120 / 1.31e-3 / 1e12),
            (5120, 8192, 2 * 8192 * 5120 * 8192 / 1.26e-3 / 1e12),
        ),
        1040: (
            (8192, 5120, 2 * 16640 * 8192 * 5120 / 2.331e-3 / 1e12),
            (5120, 8192, 2 * 16640 * 5120 * 8192 / 2.424e-3 / 1e12),
        ),
    }
    for rows, pair in points.items():
        factors = [t / 989 / wave_fraction(rows, n, 16) / _dense_bf16(k) for n, k, t in pair]
        mean = sum(factors) / 2
        assert HOPPER_GEMM_TABLE.bf16.rows_factor[0 if rows == 512 else 1] == pytest.approx((rows, mean), rel=1e-9)
        for (n, k, measured), factor in zip(pair, factors):
            assert tflops(Gemm(rows, n, k, groups=16)) == pytest.approx(measured * mean / factor, rel=1e-9)
    assert points[512][0][2] == pytest.approx(524.6, abs=0.05) and points[1040][0][2] == pytest.approx(598.8, abs=0.05)


def test_te_cutlass_grouped_points_return_their_tflops() -> None:
    """TransformerEngine PR #2045 (H100, TE 2.7, CUDA 12.9): TE's CUTLASS grouped GEMM, n 768, K 2048 (Qwen3-30B's
    expert width and hidden size). 16 x 2048 rows and 8 x 4096 rows are both 16 x 6 x 16 = 8 x 32 x 6 = 1,536
    tiles, 12 waves of 132 (1,584): share 32/33. Over the dense curve at K 2048 (cuBLAS 2048^3: 676.59 at 32/33)
    the factors are 636.927 / 676.59 = 0.94138 at 2,048 rows and 650.574 / 676.59 = 0.96155 at 4,096; one point
    per rows value, so each comes back exactly, and the measured factor at 4,096 replaces the assumed 1.0 there
    (flat beyond: 8,192 rows run at the 4,096 factor)."""
    assert wave_fraction(2048, 768, 16) == pytest.approx(32 / 33, rel=1e-12)
    assert wave_fraction(4096, 768, 8) == pytest.approx(32 / 33, rel=1e-12)
    factor = HOPPER_GEMM_TABLE.bf16.rows_factor
    assert factor[2:] == (
        (2048.0, pytest.approx(636.927 / 676.59, rel=1e-12)),
        (4096.0, pytest.approx(650.574 / 676.59, rel=1e-12)),
    )
    assert tflops(Gemm(2048, 768, 2048, groups=16)) == pytest.approx(636.927, rel=1e-9)
    assert tflops(Gemm(4096, 768, 2048, groups=8)) == pytest.approx(650.574, rel=1e-9)
    assert tflops(Gemm(8192, 768, 2048, groups=4)) == pytest.approx(650.574, rel=1e-9)  # same 1,536 tiles
    # 3,000 rows: between the two factors in log rows; 24 x 6 x 8 = 1,152 tiles, 9 waves (1,188 slots)
    t = math.log(3000 / 2048) / math.log(2)
    low, high = 636.927 / 676.59, 650.574 / 676.59
    expected = 676.59 / WAVES_32_33 * (low + t * (high - low)) * wave_fraction(3000, 768, 8)
    assert tflops(Gemm(3000, 768, 2048, groups=8)) == pytest.approx(expected, rel=1e-9)


def test_te_multi_stream_grouped_gemm_runs_at_its_measured_share_of_the_cutlass_kernel() -> None:
    """TransformerEngine PR #2045's TE 2.7 column, measured beside its CUTLASS one (H100): GroupedLinear's multi-stream
    cuBLAS path at 627.903 TFLOP/s (8 x 4,096 rows) and 553.945 (16 x 2,048), so a multi-stream grouped GEMM runs at
    627.903 / 650.574 and 553.945 / 636.927 of the grouped kernel's speed at 12.9 and 6.4 GFLOP per group (flat
    beyond), in every precision of Hopper's table and in every pass of an expert (its input and weight gradients
    do the forward's FLOPs per group); one group is a plain GEMM; Blackwell's table takes the same share (TE runs one
    cuBLAS GEMM per expert there too, simulator/costs/blackwell_tables.py)."""
    big, small = 2.0 * 4096 * 768 * 2048, 2.0 * 2048 * 768 * 2048
    assert HOPPER_GEMM_TABLE.multi_stream == (
        (small, pytest.approx(553.945 / 636.927, rel=1e-12)),
        (big, pytest.approx(627.903 / 650.574, rel=1e-12)),
    )
    assert tflops(Gemm(2048, 768, 2048, groups=16, multi_stream=True)) == pytest.approx(553.945, rel=1e-9)
    assert tflops(Gemm(4096, 768, 2048, groups=8, multi_stream=True)) == pytest.approx(627.903, rel=1e-9)
    t = math.log(3.0 * 2048 * 768 * 2048 / small) / math.log(big / small)  # 3,072 rows: between, in log FLOPs
    share = 553.945 / 636.927 + t * (627.903 / 650.574 - 553.945 / 636.927)
    assert tflops(Gemm(3072, 768, 2048, groups=8, multi_stream=True)) == pytest.approx(
        tflops(Gemm(3072, 768, 2048, groups=8)) * share, rel=1e-9
    )
    for precision in PRECISIONS:  # compute-bound shapes, where the share is the whole difference
        grouped = Gemm(8192, 7168, 2048, groups=8, precision=precision)
        multi = Gemm(8192, 7168, 2048, groups=8, precision=precision, multi_stream=True)
        for one, other in ((grouped, multi), (grouped.dgrad(), multi.dgrad()), (grouped.wgrad(), multi.wgrad())):
            assert tflops(other) == pytest.approx(tflops(one) * 627.903 / 650.574, rel=1e-9)
    wgrad = Gemm(2048, 768, 2048, groups=16, multi_stream=True).wgrad()  # 768 x 2048 weights, K 2048 tokens
    assert tflops(wgrad) == pytest.approx(tflops(Gemm(2048, 768, 2048, groups=16).wgrad()) * 553.945 / 636.927)
    assert tflops(Gemm(4096, 768, 2048, multi_stream=True)) == tflops(Gemm(4096, 768, 2048))
    blackwell = toy_calibration(gemm_efficiency=None, memory_efficiency=0.8, compute_residual=1.0)
    b200 = gpu_preset("b200")
    grouped, multi = Gemm(2048, 7168, 2048, groups=8), Gemm(2048, 7168, 2048, groups=8, multi_stream=True)
    overhead_s = blackwell.kernel_overhead_s  # 60 GFLOP per group, past the larger point: its share, compute-bound
    assert gemm_time_s(multi, b200, blackwell) - overhead_s == pytest.approx(
        (gemm_time_s(grouped, b200, blackwell) - overhead_s) / (627.903 / 650.574), rel=1e-12
    )


def test_rows_factor_reaches_one_only_where_no_point_reaches_dense_rows() -> None:
    """The assumed 1.0 at 4,096 rows per group is appended only when every measured point has fewer rows."""
    from simulator.costs.gemm_efficiency import _rows_factor
    from simulator.costs.gemm_points import GemmPoint

    flat = ((1.0, 0.5),)  # a dense curve at 0.5 for every K

    def point(rows: int, tflops: float) -> GemmPoint:
        return GemmPoint(GemmKernel.BF16_GROUPED, 4, rows, 128, 1024, tflops, "made up")

    share = wave_fraction(512, 128, 4)  # 16 tiles of 132: 16 / 132
    low = point(512, 0.4 * 989 * share)  # 0.4 / 0.5 = 0.8
    assert _rows_factor((low,), flat) == ((512.0, pytest.approx(0.8, rel=1e-12)), (4096.0, 1.0))
    high = point(4096, 0.45 * 989 * wave_fraction(4096, 128, 4))  # 0.9
    assert _rows_factor((low, high), flat) == ((512.0, pytest.approx(0.8)), (4096.0, pytest.approx(0.9)))


def test_fp8_recipes_have_their_own_curves() -> None:
    """Tensorwise takes DeepGEMM's K dependence at the level of the MAMF finder's per-tensor FP8 point on H100
    SXM (1024 x 9216 x 14336 at 1402.6 TFLOP/s: 576 tiles in 5 waves of 132, 0.873 of them useful), and its own
    rows factor from torch's FP8 rowwise grouped points (1040 rows: 922.0 and 895.4 TFLOP/s) measured against
    that curve; blockwise keeps DeepGEMM's curve and masked layout. MXFP8 (Blackwell only) is assumed = blockwise."""
    table = HOPPER_GEMM_TABLE
    assert table.fp8_mxfp8 == table.fp8_blockwise
    fp8 = table.fp8_blockwise.by_k
    mamf_efficiency = 1402.6 / 1979 / (1024 * 9216 / (5 * 132 * 128 * 128))
    scale = mamf_efficiency / interpolate_log(fp8, 14336)
    assert scale == pytest.approx(1.158, abs=1e-3)
    assert table.fp8_tensorwise.by_k == tuple((k, pytest.approx(y * scale, rel=1e-12)) for k, y in fp8)
    assert tflops(Gemm(1024, 9216, 14336, precision=TENSORWISE)) == pytest.approx(1402.6, rel=2e-3)  # + 4 us
    tensorwise = table.fp8_tensorwise.by_k
    pair = (
        (8192, 5120, 2 * 16640 * 8192 * 5120 / 1.514e-3 / 1e12),
        (5120, 8192, 2 * 16640 * 5120 * 8192 / 1.559e-3 / 1e12),
    )
    factors = [t / 1979 / wave_fraction(1040, n, 16) / interpolate_log(tensorwise, k) for n, k, t in pair]
    assert table.fp8_tensorwise.rows_factor == ((1040.0, pytest.approx(sum(factors) / 2, rel=1e-9)), (4096.0, 1.0))
    for (n, k, measured), factor in zip(pair, factors):
        got = tflops(Gemm(1040, n, k, groups=16, precision=TENSORWISE))
        assert got == pytest.approx(measured * sum(factors) / 2 / factor, rel=1e-9)
    # 512 rows, K = 7168: DeepGEMM's masked factor (0.90) is far above the rowwise one (flat below 1040)
    assert table.tile_efficiency(7168, BLOCKWISE, 512) > table.tile_efficiency(7168, TENSORWISE, 512)


def test_recipe_reaches_the_gemms() -> None:
    """--fp8-recipe picks the GEMM kernel: delayed / tensorwise -> per-tensor, blockwise, mxfp8; the presets'
    FP8 (no recipe) is DeepSeek-V3's block scaling. Attention-side and bf16_only GEMMs stay BF16."""
    model, base = model_preset("paper-352b"), layout_preset("megascale-moe").with_(gemm_dtype="fp8")
    cases = {"": BLOCKWISE, "delayed": TENSORWISE, "tensorwise": TENSORWISE, "blockwise": BLOCKWISE}
    cases["mxfp8"] = GemmPrecision.FP8_MXFP8
    for recipe, precision in cases.items():
        steps = layer_recipe(model, base.with_(fp8_recipe=recipe), 4096, 8)
        kinds = {s.name: s.gemm.precision for s in steps if s.gemm is not None}
        assert kinds["expert_fc13"] == kinds["expert_fc2"] == precision and kinds["router"] == BF16


def test_monotone_mean_by_hand() -> None:
    """Equal x averaged ((2, 0.6), (2, 0.8) -> 0.7), then 0.7 > 0.6 at x = 3 pooled to 0.65; rising kept."""
    curve = monotone_mean([(1, 0.5), (2, 0.6), (2, 0.8), (3, 0.6), (4, 0.9)])
    assert [x for x, _ in curve] == [1, 2, 3, 4]
    assert [y for _, y in curve] == pytest.approx([0.5, 0.65, 0.65, 0.9], rel=1e-12)


def test_bf16_below_its_smallest_k_follows_fp8_at_twice_k() -> None:
    """No BF16 point below K = 2048: eff(1024) = eff(2048) x fp8(2048) / fp8(4096) (a BF16 tile of depth K
    costs as an FP8 tile of depth 2K)."""
    table, fp8 = HOPPER_GEMM_TABLE, HOPPER_GEMM_TABLE.fp8_blockwise.by_k
    expected = 676.59 / 989 / WAVES_32_33 * interpolate_log(fp8, 2048) / interpolate_log(fp8, 4096)
    assert table.tile_efficiency(1024, BF16) == pytest.approx(expected, rel=1e-12)


def test_interpolation_is_linear_in_log_k_and_flat_outside() -> None:
    """Between (1000, 0.4) and (4000, 0.8): K = 2000 is half way in log K -> 0.6; beyond the ends, flat."""
    points = ((1000.0, 0.4), (4000.0, 0.8))
    assert interpolate_log(points, 2000) == pytest.approx(0.6, rel=1e-12)
    assert interpolate_log(points, 500) == 0.4
    assert interpolate_log(points, 9000) == 0.8


def test_toy_table_gemm_by_hand() -> None:
    """Toy table BF16 (1000, 0.5) - (4000, 1.0): K = 2000 -> 0.75. Gemm 1280 x 1280 x 2000 on the toy GPU
    (100 SMs at 1e12 FLOP/s) is one wave of 2*128*128*2000 = 65.536 MFLOP tiles at 0.75e12 -> 87.381 us."""
    flat = KernelCurve(((1000.0, 1.0),))
    table = GemmEfficiencyTable(KernelCurve(((1000.0, 0.5), (4000.0, 1.0))), flat, flat, flat)
    cal = toy_calibration(gemm_efficiency=table)
    assert gemm_time_s(Gemm(1280, 1280, 2000), toy_gpu(), cal) == pytest.approx(65.536e6 / 0.75e12, rel=1e-12)


def test_fp8_over_bf16_comes_from_the_tables_not_2x() -> None:
    """4096 x 4096 x 7168 on the H800: FP8 / BF16 speed = (1979 / 989) x eff_fp8(7168) / eff_bf16(7168), ~1.6."""
    bf16 = gemm_time_s(Gemm(4096, 4096, 7168), H800, BARE)
    fp8 = gemm_time_s(Gemm(4096, 4096, 7168, precision=BLOCKWISE), H800, BARE)
    table = HOPPER_GEMM_TABLE
    expected = 1979 / 989 * table.tile_efficiency(7168, BLOCKWISE) / table.tile_efficiency(7168, BF16)
    assert bf16 / fp8 == pytest.approx(expected, rel=1e-9)
    assert 1.3 < bf16 / fp8 < 1.9


def test_efficiency_rises_with_k_and_rows_per_group() -> None:
    """Short reductions amortize less of the per-tile cost; grouped GEMMs with few rows per group lose more;
    from 4096 rows per group a grouped GEMM runs as the dense one (assumed for FP8), or at the factor TE's CUTLASS
    grouped GEMM measures there (BF16, TransformerEngine #2045: 650.574 / 676.59)."""
    ks = (256, 512, 960, 1024, 2048, 4096, 5120, 8192, 13312, 16384)
    rows = (128, 256, 512, 960, 1040, 2048, 4096, 8192)
    for precision in PRECISIONS:
        effs = [HOPPER_GEMM_TABLE.tile_efficiency(k, precision) for k in ks]
        assert effs == sorted(effs)
        for k in (960, 4096, 14336):
            factors = [HOPPER_GEMM_TABLE.tile_efficiency(k, precision, r) for r in rows]
            assert factors == sorted(factors)
            at_dense_rows = 650.574 / 676.59 if precision == BF16 else 1.0
            dense = HOPPER_GEMM_TABLE.tile_efficiency(k, precision)
            assert factors[-2] == factors[-1] == pytest.approx(dense * at_dense_rows, rel=1e-12)


def test_grouped_is_slower_than_dense_of_the_same_shape() -> None:
    """The expert GEMMs of paper-352b (4 experts x 960 rows, hidden 4096, SwiGLU FFN 14336): each grouped
    GEMM below the dense one of the same rows, in every precision; BF16 fc1 lands inside the published
    grouped range (524.6 at 512 rows ... 598.8 at 1040), not at the dense 0.8 of peak."""
    for precision in PRECISIONS:
        for n, k in ((2 * 14336, 4096), (4096, 14336)):
            grouped = tflops(Gemm(960, n, k, groups=4, precision=precision))
            dense = tflops(Gemm(4 * 960, n, k, precision=precision))
            assert grouped < dense
    assert 524.6 < tflops(Gemm(960, 2 * 14336, 4096, groups=4)) < 598.8


def test_every_point_is_a_hopper_measurement_with_a_source() -> None:
    """Each row names its source and stays under its dtype's peak after the waves are divided out."""
    for point in GEMM_POINTS:
        peak = 989 if point.kernel in (GemmKernel.BF16_DENSE, GemmKernel.BF16_GROUPED) else 1979
        assert point.source and 0 < point.tflops < peak * wave_fraction(point.m, point.n, point.groups)


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
