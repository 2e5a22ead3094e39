"""Blackwell's kernel tables (simulator.costs.blackwell_tables, generations): published points come back, worked
out by hand; Hopper GPUs keep Hopper's tables; the GPU's typed generation picks them."""

from __future__ import annotations

import dataclasses
import math

import pytest

from experiments.common.error_band import KnownError, Mechanisms, band_for, generation_of
from simulator.costs.attention_cost import attention_op_efficiency
from simulator.costs.blackwell_points import B300, BLACKWELL_SUMS, CUDNN_GB200_TFLOPS, CUDNN_SEQ_LENS, blackwell_points
from simulator.costs.blackwell_tables import (
    BLACKWELL_GEMM_TABLE,
    K_SCALE,
    blackwell_attention_efficiency,
    blackwell_gemm_table,
    mamf_level,
    sum_efficiency,
    te_pair_ratio,
)
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.collective_efficiency import Link, hybridep_efficiency, nvls_all_reduce_efficiency
from simulator.costs.gemm_efficiency import HOPPER_GEMM_TABLE, attention_efficiency, point_efficiency
from simulator.costs.gemm_points import GemmKernel
from simulator.costs.generations import gemm_level, gemm_table
from simulator.costs.kernels import attention_time_s, deepep_efficiency, gemm_time_s, tensor_core_derate
from topologies.errors import ConfigError
from topologies.hardware import GpuGeneration, GpuSpec, gpu_preset
from workloads.ops import AttentionShape, Gemm, GemmPrecision

CAL = DEFAULT_CALIBRATION


def test_presets_carry_their_generation() -> None:
    assert {name: gpu_preset(name).generation for name in ("h800", "h100", "h200", "h20", "a100", "b200", "gb200")} == {
        "h800": GpuGeneration.HOPPER,
        "h100": GpuGeneration.HOPPER,
        "h200": GpuGeneration.HOPPER,
        "h20": GpuGeneration.HOPPER,
        "a100": GpuGeneration.AMPERE,
        "b200": GpuGeneration.BLACKWELL,
        "gb200": GpuGeneration.BLACKWELL,
    }
    assert (
        generation_of("gb200") == "blackwell" and generation_of("h800") == "hopper" and generation_of("x9") == "other"
    )


def test_a_gpu_mapping_names_its_generation() -> None:
    fields = dict(gpu_preset("b200").__dict__, name="my-b200")
    assert GpuSpec(**{**fields, "generation": "Blackwell"}).generation == GpuGeneration.BLACKWELL
    with pytest.raises(ConfigError, match="generation: must be one of ampere, hopper, blackwell"):
        GpuSpec(**{**fields, "generation": "rubin"})


def test_hopper_gpus_keep_hopper_tables() -> None:
    """The registry hands a Hopper GPU the table it had before generations existed: the same GEMM and attention
    times as with the Hopper table fixed in the calibration."""
    fixed = CAL.with_(gemm_efficiency=HOPPER_GEMM_TABLE)
    for name in ("h800", "h100"):
        gpu = gpu_preset(name)
        assert gemm_table(gpu, CAL) is HOPPER_GEMM_TABLE
        for precision in (p for p in GemmPrecision if p != GemmPrecision.NVFP4):  # NVFP4: Blackwell's only
            gemm = Gemm(4096, 2048, 7168, groups=8, precision=precision)
            assert gemm_time_s(gemm, gpu, CAL) == gemm_time_s(gemm, gpu, fixed)
    shape = AttentionShape(128, 128, 4096)
    assert attention_op_efficiency(shape, False, CAL, GpuGeneration.HOPPER) == attention_efficiency(
        "fa3", False, True, 128, 4096
    )


def test_blackwell_gpus_get_blackwell_tables_and_a_fixed_table_overrides() -> None:
    b200 = gpu_preset("b200")
    assert gemm_table(b200, CAL) is BLACKWELL_GEMM_TABLE
    assert gemm_table(b200, CAL.with_(gemm_efficiency=HOPPER_GEMM_TABLE)) is HOPPER_GEMM_TABLE
    # a compute-bound BF16 GEMM on the B200 preset by hand: 64 x 64 tiles of 128 x 128 = 4096 tiles, 28 waves of 148
    # SMs; a tile is 2 x 128 x 128 x 8192 FLOPs at the SM's share of 2.25 PFLOP/s x the table's efficiency x the B200's
    # own MAMF level (its 1,745 TFLOP/s point, 0.781 of its peak, over the three MAMF points' mean, 0.767) x derate
    level = mamf_level("b200", GemmKernel.BF16_DENSE)
    assert level == pytest.approx(0.781 / 0.767, abs=2e-3)
    efficiency = BLACKWELL_GEMM_TABLE.tile_efficiency(8192, GemmPrecision.BF16) * level
    tile_s = 2 * 128 * 128 * 8192 / (2.25e15 / 148 * efficiency * tensor_core_derate(CAL))
    assert gemm_time_s(Gemm(8192, 8192, 8192), b200, CAL) == pytest.approx(28 * tile_s + CAL.kernel_overhead_s)


def test_each_blackwell_gpu_runs_at_its_own_mamf_level() -> None:
    """The MAMF finder's best shapes, one protocol on each GPU (stas00/ml-engineering): BF16 1,745 / 1,822 / 1,769
    TFLOP/s on B200 / GB200 / B300, FP8 3,432.5 / 3,615.6 / 3,353.3. The same GEMM then runs on a GB200 at its MAMF
    ratio to a B200's (1.04x BF16, 1.05x FP8, within the waves of its 152 against 148 SMs), not at the datasheets'
    2,500 / 2,250 = 1.11x; a GB300, with no MAMF point of its own, at the pooled table's level."""
    b200, gb200, gb300 = (gpu_preset(name) for name in ("b200", "gb200", "gb300"))
    for precision, mamf in ((GemmPrecision.BF16, 1822.0 / 1745.0), (GemmPrecision.FP8_TENSORWISE, 3615.6 / 3432.5)):
        gemm = Gemm(16384, 16384, 8192, precision=precision)
        ratio = gemm_time_s(gemm, b200, CAL) / gemm_time_s(gemm, gb200, CAL)
        assert ratio == pytest.approx(mamf, rel=0.03), precision
    assert mamf_level("gb300", GemmKernel.BF16_DENSE) == mamf_level("h100", GemmKernel.BF16_DENSE) == 1.0
    assert gemm_level(gb300, GemmPrecision.NVFP4, CAL) == 1.0
    assert gemm_level(gb200, GemmPrecision.NVFP4, CAL) == mamf_level("gb200", GemmKernel.FP8_TENSORWISE_DENSE)
    assert gemm_level(gb200, GemmPrecision.BF16, CAL.with_(gemm_efficiency=HOPPER_GEMM_TABLE)) == 1.0


def test_mxfp8_is_the_fp8_curve_at_tes_same_run_ratio() -> None:
    """TE's B300 gemm_profiling times the same 12 GEMMs pre-quantized in both recipes: MXFP8 7.161 ms, FP8 current
    scaling 6.812 ms. The MXFP8 curve is the FP8 per-tensor curve times 6.812 / 7.161 = 0.951 at every K, so the 12
    GEMMs timed on the two curves by hand (full waves of 128 x 128 tiles on B300's 160 SMs) keep TE's ratio."""
    table = BLACKWELL_GEMM_TABLE
    assert te_pair_ratio(GemmKernel.MXFP8_DENSE, GemmKernel.FP8_TENSORWISE_DENSE) == pytest.approx(6.812 / 7.161)
    for k in (256, 1024, 2048, 4096, 7168, 14336, 65536):
        mxfp8 = table.tile_efficiency(k, GemmPrecision.FP8_MXFP8)
        assert mxfp8 == pytest.approx(table.tile_efficiency(k, GemmPrecision.FP8_TENSORWISE) * 6.812 / 7.161), k
    mxfp8_sum = next(s for s in BLACKWELL_SUMS if s.kernel == GemmKernel.MXFP8_DENSE)

    def layer_s(precision: GemmPrecision) -> float:
        tflops_per_sm = 4500e12 / B300.sms
        return sum(
            math.ceil(math.ceil(m / 128) * math.ceil(n / 128) / B300.sms)
            * 2
            * 128
            * 128
            * k
            / (tflops_per_sm * table.tile_efficiency(k, precision))
            for m, n, k in mxfp8_sum.shapes
        )

    assert layer_s(GemmPrecision.FP8_MXFP8) / layer_s(GemmPrecision.FP8_TENSORWISE) == pytest.approx(7.161 / 6.812)
    # 19.17 TFLOP in 7.161 ms is 2.68 PFLOP/s, 0.595 of 4.5; the partial last waves (each GEMM 97-100% full on 160
    # SMs) leave the full-wave efficiency a little above that
    assert 19.1727e12 / 7.161e-3 / 4500e12 < sum_efficiency(mxfp8_sum) < 19.1727e12 / 7.161e-3 / 4500e12 / 0.97
    # FP8 blockwise runs as MXFP8 on Blackwell (TransformerEngine gemm_profiling.rst)
    assert table.fp8_blockwise is table.fp8_mxfp8


def test_mxfp8_curve_does_not_pool_torchaos_grouped_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """torchao's B200 MXFP8 grouped GEMM (torch._scaled_grouped_mm, 1838.1 us for (131072, 7168) @ (8, 7168, 2048):
    0.47 of peak) is another kernel than the cuBLAS GEMMs TE runs: the curves are the same without it and with it
    twice as slow, and the MXFP8 curve stays above it where its K lies (it used to be pooled in, at 0.47)."""
    import simulator.costs.blackwell_points as points_module

    torchao = blackwell_points(GemmKernel.MXFP8_GROUPED)
    assert len(torchao) == 2 and all(p.gpu.name == "B200 SXM" for p in torchao)
    for p in torchao:
        assert point_efficiency(p) == pytest.approx(0.466, abs=0.001)
        assert BLACKWELL_GEMM_TABLE.tile_efficiency(p.k, GemmPrecision.FP8_MXFP8) > point_efficiency(p) * 1.4
    others = tuple(p for p in points_module.BLACKWELL_POINTS if p.kernel != GemmKernel.MXFP8_GROUPED)
    slower = tuple(dataclasses.replace(p, tflops=p.tflops / 2) for p in torchao)
    for points in (others, others + slower):
        monkeypatch.setattr(points_module, "BLACKWELL_POINTS", points)
        rebuilt = blackwell_gemm_table()
        for precision in GemmPrecision:
            assert rebuilt.curve(precision) == BLACKWELL_GEMM_TABLE.curve(precision), precision


def test_blackwell_bf16_sits_among_its_points() -> None:
    """From K = 1,024 up the published BF16 points do not rise with K: the monotone fit is their pooled level, inside
    their range (0.63-0.79 of peak), under Hopper's at large K (0.83)."""
    points = [point_efficiency(p) for p in blackwell_points(GemmKernel.BF16_DENSE)]
    for k in (1024, 2048, 4096, 16384):
        assert min(points) < BLACKWELL_GEMM_TABLE.tile_efficiency(k, GemmPrecision.BF16) < max(points)
    assert BLACKWELL_GEMM_TABLE.tile_efficiency(16384, GemmPrecision.BF16) < HOPPER_GEMM_TABLE.tile_efficiency(
        16384, GemmPrecision.BF16
    )
    # below the smallest published K (1,024) it falls as Hopper's does at the K of equal main-loop time, 0.49 K:
    # Hopper's K = 256 point lands at 256 / K_SCALE, scaled by Hopper's fall from 0.49 x 1,024 to 256
    hopper, blackwell = HOPPER_GEMM_TABLE.bf16, BLACKWELL_GEMM_TABLE.bf16
    ratio = blackwell.efficiency(256 / K_SCALE) / blackwell.efficiency(1024)
    assert ratio == pytest.approx(hopper.efficiency(256) / hopper.efficiency(K_SCALE * 1024), rel=1e-12)
    assert K_SCALE == pytest.approx((989 / 132) / (2250 / 148))


def test_attention_levels_reproduce_fa4_and_cudnn() -> None:
    """FA4's 1613 TFLOP/s on B200 at FA3's best head-dim-128 forward shape (16k, no mask); cuDNN's GB200 benchmark
    (cudnn-frontend sdpa_benchmark_training, head dim 128, causal) at each published length, both directions, BF16
    and FP8; between lengths log-interpolated; Hopper's shape elsewhere (no mask: Hopper's causal-to-full gain)."""
    assert blackwell_attention_efficiency("fa3", False, False, 128, 16384) == pytest.approx(1613 / 2250, rel=1e-12)
    for family, dtype in (("cudnn", "bf16"), ("cudnn-fp8", "fp8")):
        for backward, direction in ((False, "fwd"), (True, "bwd")):
            for seq_len, tflops in zip(CUDNN_SEQ_LENS, CUDNN_GB200_TFLOPS[(dtype, direction)]):
                efficiency = blackwell_attention_efficiency(family, backward, True, 128, seq_len)
                assert efficiency == pytest.approx(tflops / 2500, rel=1e-9), (family, direction, seq_len)
    assert blackwell_attention_efficiency("cudnn", True, True, 128, 4096) * 2500 == pytest.approx(1054)
    assert blackwell_attention_efficiency("cudnn-fp8", False, True, 128, 4096) * 2500 == pytest.approx(1663)
    hopper_gain = attention_efficiency("cudnn", False, False, 128, 4096) / attention_efficiency(
        "cudnn", False, True, 128, 4096
    )
    no_mask = blackwell_attention_efficiency("cudnn", False, False, 128, 4096)
    assert no_mask / blackwell_attention_efficiency("cudnn", False, True, 128, 4096) == pytest.approx(hopper_gain)
    # FA2 (an SM80 kernel) runs at Hopper's TFLOP/s
    assert blackwell_attention_efficiency("fa2", True, False, 128, 4096) == pytest.approx(310 / 2250)
    shape = AttentionShape(128, 128, 16384, causal=False)
    b200 = gpu_preset("b200")
    expected = 1e15 / (2.25e15 * 1613 / 2250 * tensor_core_derate(CAL)) + CAL.kernel_overhead_s
    assert attention_time_s(1e15, False, b200, CAL, shape) == pytest.approx(expected)


def test_nvlink5_collectives() -> None:
    assert gpu_preset("b200").nvlink_bandwidth_Bps == gpu_preset("gb200").nvlink_bandwidth_Bps == 680e9
    assert nvls_all_reduce_efficiency("gb200", 8) == pytest.approx(850 / 680)
    assert nvls_all_reduce_efficiency("h800", 8) == pytest.approx(215 / 160)  # Hopper's unchanged
    assert nvls_all_reduce_efficiency("h100", 8) == pytest.approx(480 / 370)
    # DeepEP V2's logical bandwidths at EP 8: 7 / 8 of them on the wire
    assert deepep_efficiency(Link.NVLINK, GpuGeneration.BLACKWELL) == pytest.approx(2 / (680 / 643 + 680 / 675) * 7 / 8)
    assert deepep_efficiency(Link.NVLINK) == pytest.approx(2 / (160 / 153 + 160 / 158) * 7 / 8)
    # over the NIC the same on both (DeepEP V2 measures SM100 as SM90): V1's EP 64 rows, 7 / 8 on the wire, of 47 GB/s
    assert deepep_efficiency(Link.NIC, GpuGeneration.BLACKWELL) == deepep_efficiency(Link.NIC)
    assert deepep_efficiency(Link.NIC) == pytest.approx(2 / (47 / 51 + 47 / 50) * 7 / 8)


def test_a_blackwell_prediction_says_no_blackwell_run_is_validated() -> None:
    hopper = Mechanisms(True, False, "deepep", "hopper", "bf16", "1f1b")
    known = [KnownError(f"h{i}", hopper, e) for i, e in enumerate([0.1, 0.2, -0.1, 0.0, 0.05, 0.15])]
    band = band_for(hopper._replace(generation="blackwell"), known)
    assert (
        band.note.startswith("no blackwell run is in the validation corpus") and "blackwell kernel tables" in band.note
    )
    assert band.to_json()["note"] == band.note and "generation" not in band.matched
    assert band_for(hopper, known).note == ""


def test_hybridep_nvlink5_rates() -> None:
    """HybridEP's GB200 NVL kernel rates (README_Hybrid-EP.md, 32 SMs): 764.03 / 737.13 GB/s at 8 ranks over NCCL's
    680, (r - 1) / r of them on the wire at r ranks (algorithm bandwidths count a rank's own tokens); 20 ranks read
    at the 24-rank row; beyond 36 the 36-rank row; none for a GPU without a table."""
    assert hybridep_efficiency("gb200", 8) == pytest.approx(2 / (680 / 764.03 + 680 / 737.13) * 7 / 8)
    assert hybridep_efficiency("gb200", 20) == pytest.approx(2 / (680 / 665.97 + 680 / 639.80) * 23 / 24)
    assert hybridep_efficiency("gb200", 64) == hybridep_efficiency("gb200", 36)
    assert hybridep_efficiency("h100", 8) is None


def test_fp8_attention_is_refused_off_blackwell() -> None:
    """cuDNN's FP8 attention is timed from its Blackwell benchmark only: on Hopper the layout asking for it is told so."""
    shape = AttentionShape(128, 128, 4096, kernel="cudnn-fp8")
    assert attention_op_efficiency(shape, False, DEFAULT_CALIBRATION, GpuGeneration.BLACKWELL) > 0
    with pytest.raises(ConfigError, match="cudnn-fp8"):
        attention_op_efficiency(shape, False, DEFAULT_CALIBRATION, GpuGeneration.HOPPER)


def test_ampere_is_hopper_at_the_a100s_measured_bf16_level() -> None:
    """The A100 takes Hopper's curves, its BF16 one scaled so that the MAMF finder's best A100 shape (271.2 TFLOP/s at
    1024 x 10240 x 5120, 86.9% of 312; gemm_points.A100_MAMF) comes out at its measured speed on a full wave."""
    from simulator.costs.gemm_efficiency import AMPERE_GEMM_TABLE, point_efficiency
    from simulator.costs.gemm_points import A100_MAMF

    table = gemm_table(gpu_preset("a100"), CAL)
    assert table is AMPERE_GEMM_TABLE
    assert table.tile_efficiency(5120, GemmPrecision.BF16) == pytest.approx(point_efficiency(A100_MAMF), rel=1e-12)
    hopper = HOPPER_GEMM_TABLE.tile_efficiency(5120, GemmPrecision.BF16)
    for k in (512, 2048, 16384):  # Hopper's K dependence, at 1.07 x its level
        assert table.tile_efficiency(k, GemmPrecision.BF16) / HOPPER_GEMM_TABLE.tile_efficiency(
            k, GemmPrecision.BF16
        ) == pytest.approx(point_efficiency(A100_MAMF) / hopper)
    assert table.fp8_tensorwise == HOPPER_GEMM_TABLE.fp8_tensorwise  # no FP8 tensor cores: never faster than BF16


def test_fp8_on_an_a100_is_refused_as_transformer_engine_refuses_it() -> None:
    """The A100 has no FP8 tensor cores; TE refuses FP8 below compute capability 8.9, and so does moesim, saying so."""
    from simulator.report.simulate import simulate
    from topologies.errors import ConfigError
    from workloads.specs.layouts import layout_preset

    layout = layout_preset("megascale-moe").with_(gemm_dtype="fp8")
    with pytest.raises(ConfigError, match="a100 has none: train in BF16"):
        simulate("mixtral-8x7b", layout, 64, cluster="a100", global_batch=16, seq_len=1024)
