"""Kernel-level checks printed beside the Blackwell rows (experiments/validation/blackwell/check.py): published
Blackwell kernel times against what moesim's tables give the same shapes. None of them is in a table they check: each
line states a gap, the cost model is not changed on it."""

from __future__ import annotations

from simulator.costs.calibration import BENCHMARK_CALIBRATION, DEFAULT_CALIBRATION, Calibration
from simulator.costs.kernels import gemm_time_s, memory_time_s
from topologies.cluster import cluster_preset
from topologies.hardware import gpu_preset
from workloads.ops import BYTES_BF16, Gemm, GemmPrecision
from workloads.recipes.fp8_quant import FP8_BYTES, QUANT_KERNELS
from workloads.specs.precision import Fp8Recipe

# TE's MXFP8 quantization on Blackwell: NVIDIA/TransformerEngine@d0067d0d docs/examples/gemm_profiling/gemm_profiling.rst,
# "NVIDIA B300 SXM6 AC", one layer's 12 GEMMs (hidden 4,096, FFN 16,384, 15,872 tokens), MXFP8 in autocast 8.984 ms
# against pre-quantized 7.161 ms: 1.823 ms of TE's cast kernels. Autocast runs each op as a te.Linear forward
# (benchmarks/gemm/benchmark_gemm.py benchmark_fp8) with grad enabled and a weight that needs a gradient, so
# (transformer_engine/pytorch/module/linear.py) its input is quantized row- and column-wise in one kernel
# (backward_needs_input) and its weight row-wise only (the input needs no gradient), afresh each call
# (is_first_microbatch None): 2 B read per element, 1 B and an E8M0 scale per 32 written per copy. The page's BF16 rows
# bound how well one difference of two totals is known: BF16 quantizes nothing in either mode, yet runs 12.758 ms in
# autocast against 13.102 pre-quantized, 0.344 ms apart (19% of 1.823). torchao's MXFP8 casts on B200 (pytorch/ao@
# 98e81e01 torchao/prototype/moe_training/README.md "MXFP8 Kernel Breakdown by Pass": 580.6 us row-wise, 670.7 us
# column-wise for 131,072 x 7,168, 0.55-0.64 of the B200's 7.672 TB/s) are torchao's own kernels, not TE's, so they are not used to
# price TE's. Calibration.memory_efficiency (0.8, from H100 / H200 kernels) is what the simulator uses; the check states
# the gap and the cost model is not changed.
TE_B300_MXFP8_QUANT_S = 8.984e-3 - 7.161e-3
_TE_TOKENS, _TE_SHAPES = 15872, ((4096, 12288), (4096, 4096), (4096, 16384), (16384, 4096))


def te_b300_mxfp8_quantization_s(calibration: Calibration = DEFAULT_CALIBRATION) -> float:
    """TE's B300 benchmark's MXFP8 quantization (autocast - pre-quantized) as the simulator times it on a b300: per op
    (fprop tokens x in @ in x out, dgrad tokens x out @ out x in, wgrad in x tokens @ tokens x out) the input's two
    MXFP8 copies and the weight's one, a kernel each."""
    cost = QUANT_KERNELS[Fp8Recipe.MXFP8]
    inputs = sum(_TE_TOKENS * k + _TE_TOKENS * n + k * _TE_TOKENS for k, n in _TE_SHAPES)
    weights = sum(k * n + n * k + _TE_TOKENS * n for k, n in _TE_SHAPES)
    copy_bytes = FP8_BYTES + cost.scale_bytes
    total_bytes = inputs * (BYTES_BF16 + 2 * copy_bytes) + weights * (BYTES_BF16 + copy_bytes)
    gpu = cluster_preset("b300", 8).gpu
    return memory_time_s(total_bytes, cost.kernels * 2 * 3 * len(_TE_SHAPES), gpu, calibration)


# torchao's MXFP8 grouped GEMM on B200, printed beside what moesim gives the same shape: pytorch/ao@98e81e01
# torchao/prototype/moe_training/README.md "MXFP8 Kernel Breakdown by Pass" (torch 2.11.0.dev20251216+cu128):
# torch._scaled_grouped_mm 2D-3D, (131072, 7168) @ (8, 7168, 2048) and (131072, 2048) @ (8, 2048, 7168), 1838.1 us
# each. That is PyTorch's CUTLASS grouped kernel, not the cuBLAS GEMMs TE's GroupedLinear runs under Megatron-Core
# (simulator/costs/blackwell_tables.py), so it is not in moesim's MXFP8 curve: the line compares two kernels of one
# shape, it does not test the model. Simulated at benchmark clocks without the residual (BENCHMARK_CALIBRATION).
TORCHAO_GROUPED_S = 1838.1e-6
TORCHAO_GROUPED = ((16384, 2048, 7168), (16384, 7168, 2048))  # rows per group, n, k; 8 groups


def torchao_grouped_simulated_s() -> float:
    """moesim's mean time of torchao's two 2D-3D MXFP8 grouped GEMM shapes on the b200 preset, TE's kernels assumed."""
    gpu = gpu_preset("b200")
    return sum(
        gemm_time_s(Gemm(m, n, k, groups=8, precision=GemmPrecision.FP8_MXFP8), gpu, BENCHMARK_CALIBRATION)
        for m, n, k in TORCHAO_GROUPED
    ) / len(TORCHAO_GROUPED)


# cuBLASLt's block-scaled FP4 GEMM on B200, printed beside moesim's NVFP4 curve: deepseek-ai/DeepGEMM PR #348
# (2026-06-01) description, "Dense GEMM perf (B200, CUDA 12.9, vs cublasTest 13.3 direct binary)", its cBLT column.
# Those are MXFP4 operands (32-element UE8M0 scales) on the tensor-core instruction NVFP4 runs too (16-element E4M3
# scales), so the line checks the NVFP4 curve's level (TE's NVFP4 / MXFP8 ratio on the MXFP8 curve,
# simulator/costs/blackwell_tables.py), it is not in it. (m, n, k) -> TFLOP/s, the two compute-bound shapes.
CUBLASLT_FP4_TFLOPS = {(8192, 8192, 8192): 5239.0, (4096, 4096, 7168): 3939.0}


def cublaslt_fp4_simulated_tflops() -> dict[tuple[int, int, int], float]:
    """moesim's NVFP4 TFLOP/s of CUBLASLT_FP4_TFLOPS's shapes on the b200 preset, at benchmark clocks."""
    gpu = gpu_preset("b200")
    rates = {}
    for m, n, k in CUBLASLT_FP4_TFLOPS:
        seconds = gemm_time_s(Gemm(m, n, k, precision=GemmPrecision.NVFP4), gpu, BENCHMARK_CALIBRATION)
        rates[(m, n, k)] = 2.0 * m * n * k / seconds / 1e12
    return rates


# A dense SwiGLU MLP's forward and backward in eager PyTorch on a B200, printed beside moesim's time for its kernels:
# NVIDIA/cudnn-frontend@1a713353 benchmark/e2e/README.md, Qwen3.8 proxy, "Exact MLP fwd+bwd (M=8192, H=5120, I=17408):
# raw eager Torch 10.796 ms" (BF16, a full 148-SM B200, p50 of 40 Williams-balanced batches of three repeats, CUDA
# events). The module is three bias-free nn.Linear, down(silu(gate(y)) * up(y)) (benchmark/e2e/Qwen3.8/run_blocks.py
# FullAttentionBlock): nine cuBLAS GEMMs (three forward, a data and a weight gradient each backward) and six
# memory-bound kernels, silu and the product forward (5 passes over M x I), the product's two gradients and silu's
# backward (9 passes), and the sum of the two input gradients (3 passes over M x H). Many back-to-back iterations, so
# timed at the sustained clock (Calibration.sustained_clock_fraction), with and without the fitted residual.
EAGER_SWIGLU_MLP_B200_S = 10.796e-3
EAGER_SWIGLU_MLP = (8192, 5120, 17408)  # tokens, hidden, FFN


def eager_swiglu_mlp_simulated_s(calibration: Calibration = DEFAULT_CALIBRATION) -> float:
    """moesim's time for the eager SwiGLU MLP's forward and backward on the b200 preset."""
    tokens, hidden, ffn = EAGER_SWIGLU_MLP
    gemms = [Gemm(tokens, ffn, hidden)] * 2 + [Gemm(tokens, hidden, ffn)]  # gate, up, down
    gemms += [Gemm(tokens, ffn, hidden), Gemm(hidden, ffn, tokens)]  # down: data and weight gradients
    gemms += [Gemm(tokens, hidden, ffn), Gemm(ffn, hidden, tokens)] * 2  # gate, up: data and weight gradients
    gpu = gpu_preset("b200")
    elementwise_bytes = (5 + 9) * tokens * ffn * BYTES_BF16 + 3 * tokens * hidden * BYTES_BF16
    return sum(gemm_time_s(gemm, gpu, calibration) for gemm in gemms) + memory_time_s(
        elementwise_bytes, 6, gpu, calibration
    )
