"""NVFP4 training (Megatron-LM's --fp4-format e2m1, TE's NVFP4BlockScaling) on Blackwell: the flags, the GEMMs at the
FP4 peak on Blackwell's FP4 curve, the quantization kernels by hand, and the refusal on GPUs without FP4 cores."""

from __future__ import annotations

import math

import pytest

from experiments.cli.main import main
from simulator.costs.blackwell_points import B300, BLACKWELL_SUMS
from simulator.costs.blackwell_tables import BLACKWELL_GEMM_TABLE, mamf_level, te_pair_ratio
from simulator.costs.calibration import BENCHMARK_CALIBRATION
from simulator.costs.gemm_points import GemmKernel
from simulator.costs.kernels import gemm_time_s
from topologies.errors import ConfigError
from topologies.hardware import gpu_preset
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import Gemm, GemmPrecision
from workloads.recipes.fp8_quant import quantize_input
from workloads.specs.models import model_preset
from workloads.specs.precision import Fp8Recipe

MIXTRAL = model_preset("mixtral-8x7b")
FLAGS = "--expert-model-parallel-size 8 --micro-batch-size 1 --global-batch-size 64 --seq-length 4096 --bf16"


def test_nvfp4_is_the_mxfp8_curve_at_tes_same_run_ratio() -> None:
    """TE's B300 gemm_profiling times the same 12 GEMMs pre-quantized as NVFP4 (3.764 ms) and MXFP8 (7.161 ms). The NVFP4
    curve is the MXFP8 curve at that ratio, each over its own peak (B300: 12.6 PFLOP/s FP4, 4.5 FP8), so the 12 GEMMs
    timed on the two curves by hand (full waves of 128 x 128 tiles on 160 SMs) keep TE's 1.90x at every K past the
    layer's. Leveled at its own layer alone (0.41 of the FP4 peak, until this test) NVFP4 was 1.63x MXFP8 there: the
    MXFP8 curve pools the MAMF best shapes above TE's own layer, and NVFP4 had no such point."""
    table = BLACKWELL_GEMM_TABLE
    ratio = te_pair_ratio(GemmKernel.NVFP4_DENSE, GemmKernel.MXFP8_DENSE)
    assert ratio == pytest.approx((7.161 / 3.764) * 4500 / 12600)
    for k in (256, 1024, 2048, 4096, 7168, 14336, 65536):
        nvfp4 = table.tile_efficiency(k, GemmPrecision.NVFP4)
        assert nvfp4 == pytest.approx(table.tile_efficiency(k, GemmPrecision.FP8_MXFP8) * ratio), k
    shapes = next(s for s in BLACKWELL_SUMS if s.kernel == GemmKernel.NVFP4_DENSE).shapes

    def layer_s(precision: GemmPrecision, peak_flops: float) -> float:
        return sum(
            math.ceil(math.ceil(m / 128) * math.ceil(n / 128) / B300.sms) * 2 * 128 * 128 * k
            / (peak_flops / B300.sms * table.tile_efficiency(k, precision))
            for m, n, k in shapes
        )  # fmt: skip

    assert layer_s(GemmPrecision.FP8_MXFP8, 4500e12) / layer_s(GemmPrecision.NVFP4, 12600e12) == pytest.approx(
        7.161 / 3.764
    )


def test_nvfp4_gemms_run_at_the_fp4_peak_with_half_byte_operands() -> None:
    """On a GB200 a large NVFP4 GEMM takes its FP4 peak (10 PFLOP/s) times the NVFP4 curve at the GB200's own FP8 MAMF
    level (simulator/costs/blackwell_tables.py mamf_level); Hopper's table has none."""
    gpu, cal = gpu_preset("gb200"), BENCHMARK_CALIBRATION.with_(kernel_overhead_s=0.0)
    gemm = Gemm(16384, 16384, 16384, precision=GemmPrecision.NVFP4)
    level = BLACKWELL_GEMM_TABLE.tile_efficiency(16384, GemmPrecision.NVFP4)
    level *= mamf_level("gb200", GemmKernel.FP8_TENSORWISE_DENSE)
    waves = math.ceil(128 * 128 / gpu.sm_count)
    expected = waves * 2 * 128 * 128 * 16384 / (10e15 / gpu.sm_count * level)
    assert gemm_time_s(gemm, gpu, cal) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="FP4"):
        gemm_time_s(gemm, gpu_preset("h100"), cal)


def test_nvfp4_quantization_by_hand() -> None:
    """An amax pass and a cast reading BF16 twice, both FP4 copies (half a byte) with an E4M3 scale per 16: 2 + 2 +
    2 x (1/2 + 1/16) = 5.125 B per element, 2 kernels (TE NVFP4Quantizer::quantize_impl)."""
    gemm = Gemm(4096, 1536, 2048, precision=GemmPrecision.NVFP4)
    assert quantize_input(Fp8Recipe.NVFP4, gemm) == (5.125 * 4096 * 2048, 2, 0.0, 0)  # no transpose: two casts


def test_the_megatron_flags() -> None:
    """--fp4-format e2m1 is the NVFP4 recipe; with --fp8-format it is Megatron-LM's error; --fp4-recipe alone is ignored."""
    layout = parse_megatron_args(FLAGS + " --fp4-format e2m1 --fp4-recipe nvfp4").resolve(MIXTRAL).layout
    assert (layout.gemm_dtype, layout.fp8_recipe) == ("fp8", "nvfp4")
    with pytest.raises(ConfigError) as error:
        parse_megatron_args(FLAGS + " --fp4-format e2m1 --fp8-format e4m3")
    assert error.value.field == "--fp4-format"
    job = parse_megatron_args(FLAGS + " --fp4-recipe nvfp4")
    assert job.resolve(MIXTRAL).layout.fp8_recipe == "" and "--fp4-recipe" in [i.flag for i in job.ignored]


def test_nvfp4_needs_fp4_tensor_cores(capsys) -> None:
    """On an H100 the job is refused in one line; on a GB200 it runs."""
    run = ["run", "--model", "mixtral-8x7b", "--gpus", "8", "--megatron-args", FLAGS + " --fp4-format e2m1"]
    assert main([*run, "--cluster", "h100"]) == 2
    assert "needs FP4 tensor cores" in capsys.readouterr().err
    assert main([*run, "--cluster", "gb200", "--allow-oom", "--json"]) == 0


def test_grouped_nvfp4_quantization_runs_tes_group_kernels_once_for_all_experts() -> None:
    """TE GroupedLinear quantizes its experts' inputs in one tex.split_quantize call: under NVFP4, with an inner dimension
    a multiple of 128, TE's fused group kernels (the RHT amax, then the cast) run once for every expert's rows; an inner
    dimension off 128 falls back to one set per expert, as the MXFP8 path always does (multi_tensor_quantize_impl)."""
    nvfp4, mxfp8 = Fp8Recipe.NVFP4, Fp8Recipe.MXFP8
    experts = Gemm(4096, 2688, 1024, 8, precision=GemmPrecision.NVFP4)  # 8 local experts, latent width 1,024
    assert quantize_input(nvfp4, experts).kernels == 2
    assert quantize_input(nvfp4, Gemm(4096, 1024, 1856, 8, precision=GemmPrecision.NVFP4)).kernels == 2 * 8
    assert quantize_input(mxfp8, Gemm(4096, 2688, 1024, 8, precision=GemmPrecision.FP8_MXFP8)).kernels == 8
    sequential = Gemm(
        4096, 2688, 1024, 8, sequential=True, precision=GemmPrecision.NVFP4
    )  # SequentialMLP: te.Linear each
    assert quantize_input(nvfp4, sequential).kernels == 2 * 8
    # the bytes are every expert's either way: 2 B read, 2 + 2 x (1/2 + 1/16) written per element
    assert quantize_input(nvfp4, experts).mem_bytes == pytest.approx(4096 * 1024 * 8 * (2 + 2 + 2 * (1 / 2 + 1 / 16)))
