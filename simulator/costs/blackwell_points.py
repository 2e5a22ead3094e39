"""Published kernel measurements on Blackwell (B200, GB200, B300), as DATA: one row per measured shape or layer.

simulator.costs.blackwell_tables turns them into the Blackwell kernel tables. A GEMM point counts 2 m n k FLOPs per
group (as simulator.costs.gemm_points); a ``GemmSum`` is a benchmark that publishes one time for a set of GEMMs (a
transformer layer's fprop, dgrad and wgrad), kernel time only. Attention: cuDNN's own SDPA training benchmark on GB200
(forward and backward, BF16 and FP8, by sequence length). Looked for and not found: a per-shape FlashAttention-4
backward table on B200 (the FA4 paper's figures were not readable here), CUTLASS / cuBLAS grouped GEMM
tables on B200 below 4,096 rows per group (TransformerEngine has the benchmark scripts, benchmarks/linear/
benchmark_grouped_linear*.py, but publishes no results), an nccl-tests alltoall_perf size sweep on NVLink 5.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.costs.gemm_points import BenchGpu, GemmKernel, GemmPoint

# Dense peaks (no sparsity) per GPU: stas00/ml-engineering@744d01e compute/accelerator/README.md, "TFLOPS comparison
# table" (B200 and B300 SXM 2,250 BF16 / 4,500 FP8, GB200 2,500 / 5,000, from the DGX B200 / B300 and GB200 NVL72
# datasheets). SMs: B200 148 (topologies.hardware b200); GB200 152 (topologies.hardware gb200: the MAMF point below
# was found at N = 9,728 = 152 x 64); B300 160 ("Inside NVIDIA Blackwell Ultra", NVIDIA technical blog, Hot Chips 2025).
# Dense FP4 peaks: the same table's fp4 column (B200 9,000, GB200 10,000, B300 12,600 TFLOP/s).
B200 = BenchGpu("B200 SXM", 2250.0, 4500.0, 148, 9000.0)
GB200 = BenchGpu("GB200", 2500.0, 5000.0, 152, 10000.0)
B300 = BenchGpu("B300 SXM", 2250.0, 4500.0, 160, 12600.0)

# stas00/ml-engineering@744d01e compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison table":
# torch.matmul / torch._scaled_mm (per-tensor FP8, cuBLAS), the best of a brute-force shape search, mean of 100
# iterations after 50 warm-up; "Best Shape MxNxK".
_MAMF = MAMF_SOURCE = "stas00/ml-engineering@744d01e compute/accelerator/README.md MAMF table"
# NVIDIA/TransformerEngine@d0067d0d docs/examples/gemm_profiling/gemm_profiling.rst, "NVIDIA B300 SXM6 AC", model config
# hidden 4096, ffn 16384, M = 31 x 512 = 15,872 tokens, CUDA events, 10 warm-up + 100 timed. BF16 runs no quantization,
# so its autocast fprop rows are kernel times; shapes are printed M x K x N.
_TE_B300 = "NVIDIA/TransformerEngine@d0067d0d docs/examples/gemm_profiling/gemm_profiling.rst (B300)"
# pytorch/ao PR #2427 (drisspg, 2025-06-23), benchmarks/float8/bench_matmul.py on "NVIDIA B200", square torch.bfloat16
# matmuls (time_sec per shape). 1024^3 to 2048^3 (under 16 us) are not entered: the launch and teardown the model
# charges apart (Calibration.kernel_overhead_s, 2.1 us) is over 10% of them, as the H100 table leaves out 1024^3.
_AO_2427 = "pytorch/ao PR #2427 (2025-06-23), torch.matmul bf16, B200"
# pytorch/ao torchao/prototype/moe_training/README.md at 98e81e01 (2025-12-21; the same table was cited at 0b1bb117),
# "MXFP8 Kernel Breakdown by Pass" (NVIDIA B200, torch 2.11.0.dev20251216+cu128): torch._scaled_grouped_mm 2D-3D,
# (131072, 7168) @ (8, 7168, 2048) and (131072, 2048) @ (8, 2048, 7168), 1838.1 us each: 8 groups of 16,384 rows on
# average (jagged offsets), already quantized. 2,094 TFLOP/s, 0.47 of 4.5 PFLOP/s; the README's "74.6% peak TFLOPS"
# implies a 2.8 PFLOP/s basis it does not state, so the time and the shape are what is taken. (The README at 5e79e5ed,
# torchao 0.16 at a 1,000 W limit, times the same shapes at 1671.2 and 1683.4 us.) torch._scaled_grouped_mm is
# PyTorch's CUTLASS grouped kernel, which torchao's MoE training calls; Megatron-Core's TEGroupedMLP runs TE's
# GroupedLinear, whose GEMMs on Blackwell are cuBLAS (NVIDIA/TransformerEngine@d0067d0d transformer_engine/common/gemm/
# cublaslt_gemm.cu nvte_multi_tensor_gemm, "Currently only support cutlass group gemm on Hopper Arch"), so these points
# are not in moesim's MXFP8 curve (simulator/costs/blackwell_tables.py); experiments/validation/blackwell/check.py
# prints them beside moesim's time for the shape.
_AO_MOE = "pytorch/ao@98e81e01 torchao/prototype/moe_training/README.md, MXFP8 kernel breakdown, B200"


def _tflops(rows: int, n: int, k: int, seconds: float) -> float:
    """TFLOP/s of ``rows`` x ``k`` @ ``k`` x ``n`` in ``seconds``."""
    return 2.0 * rows * n * k / seconds / 1e12


# fmt: off
BLACKWELL_POINTS: tuple[GemmPoint, ...] = (
    # BF16 dense: MAMF best shapes (B300 "same as B200, newer torch/cuda")
    GemmPoint(GemmKernel.BF16_DENSE, 1, 1792, 16128, 3072, 1745.0, _MAMF + " (B200, torch 2.7.1+cu128)", B200),
    GemmPoint(GemmKernel.BF16_DENSE, 1, 4096, 9728, 2048, 1822.0, _MAMF + " (GB200, torch 2.10.0.dev+cu130)", GB200),
    GemmPoint(GemmKernel.BF16_DENSE, 1, 12288, 18432, 1024, 1769.0, _MAMF + " (B300, torch 2.9.1+cu130)", B300),
    # BF16 dense: TE's B300 fprop rows (QKV, attention out, MLP up, MLP down)
    GemmPoint(GemmKernel.BF16_DENSE, 1, 15872, 12288, 4096, _tflops(15872, 12288, 4096, 1.071e-3), _TE_B300, B300),
    GemmPoint(GemmKernel.BF16_DENSE, 1, 15872, 4096, 4096, _tflops(15872, 4096, 4096, 0.307e-3), _TE_B300, B300),
    GemmPoint(GemmKernel.BF16_DENSE, 1, 15872, 16384, 4096, _tflops(15872, 16384, 4096, 1.393e-3), _TE_B300, B300),
    GemmPoint(GemmKernel.BF16_DENSE, 1, 15872, 4096, 16384, _tflops(15872, 4096, 16384, 1.426e-3), _TE_B300, B300),
    # BF16 dense: squares on B200
    GemmPoint(GemmKernel.BF16_DENSE, 1, 3072, 3072, 3072, _tflops(3072, 3072, 3072, 3.84e-5), _AO_2427, B200),
    GemmPoint(GemmKernel.BF16_DENSE, 1, 4096, 4096, 4096, _tflops(4096, 4096, 4096, 9.74e-5), _AO_2427, B200),
    GemmPoint(GemmKernel.BF16_DENSE, 1, 6144, 6144, 6144, _tflops(6144, 6144, 6144, 3.19e-4), _AO_2427, B200),
    GemmPoint(GemmKernel.BF16_DENSE, 1, 8192, 8192, 8192, _tflops(8192, 8192, 8192, 7.74e-4), _AO_2427, B200),
    # FP8 per-tensor dense (torch._scaled_mm, cuBLAS): MAMF best shapes
    GemmPoint(GemmKernel.FP8_TENSORWISE_DENSE, 1, 15360, 4096, 3072, 3432.5, _MAMF + " FP8 (B200)", B200),
    GemmPoint(GemmKernel.FP8_TENSORWISE_DENSE, 1, 19456, 5120, 1536, 3615.6, _MAMF + " FP8 (GB200)", GB200),
    GemmPoint(GemmKernel.FP8_TENSORWISE_DENSE, 1, 3072, 6144, 7168, 3353.3, _MAMF + " FP8 (B300)", B300),
    # MXFP8 grouped, torchao's kernel (not TE's: kept as data for the printed check, out of the MXFP8 curve)
    GemmPoint(GemmKernel.MXFP8_GROUPED, 8, 16384, 2048, 7168, _tflops(131072, 2048, 7168, 1838.1e-6), _AO_MOE, B200),
    GemmPoint(GemmKernel.MXFP8_GROUPED, 8, 16384, 7168, 2048, _tflops(131072, 7168, 2048, 1838.1e-6), _AO_MOE, B200),
)
# fmt: on


@dataclass(frozen=True)
class GemmSum:
    """A benchmark that publishes one kernel time for a set of GEMM shapes (m, n, k), each run once."""

    kernel: GemmKernel
    shapes: tuple[tuple[int, int, int], ...]
    seconds: float
    source: str
    gpu: BenchGpu


def _te_layer(tokens: int, linears: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int, int], ...]:
    """The 12 GEMMs of TE's per-layer total: per linear (in, out) the fprop (tokens, out, in), the dgrad (tokens,
    in, out) and the wgrad (out, in, tokens), as m, n, k."""
    shapes: list[tuple[int, int, int]] = []
    for k_in, n_out in linears:
        shapes += [(tokens, n_out, k_in), (tokens, k_in, n_out), (n_out, k_in, tokens)]
    return tuple(shapes)


# TE's B300 "Per-layer total" with --pre-quantize (kernel time only, no quantization): QKV 4096 -> 12288, attention out
# 4096 -> 4096, MLP up 4096 -> 16384, MLP down 16384 -> 4096 at 15,872 tokens. FP8 current scaling (per-tensor) 6.812 ms,
# MXFP8 7.161 ms (BF16 13.102 ms, 12.758 in autocast: BF16 is entered by its per-shape fprop rows above). FP8 delayed
# scaling "always runs in autocast mode, even with --pre-quantize" (same page), so its 8.123 ms is not a kernel time.
_TE_LAYER = _te_layer(15872, ((4096, 12288), (4096, 4096), (4096, 16384), (16384, 4096)))
BLACKWELL_SUMS: tuple[GemmSum, ...] = (
    GemmSum(GemmKernel.FP8_TENSORWISE_DENSE, _TE_LAYER, 6.812e-3, _TE_B300 + ", FP8 current, pre-quantized", B300),
    GemmSum(GemmKernel.MXFP8_DENSE, _TE_LAYER, 7.161e-3, _TE_B300 + ", MXFP8, pre-quantized", B300),
    # NVFP4 pre-quantized 3.764 ms (6.453 in autocast, its quantization included): 1.90x MXFP8's on the same GEMMs
    GemmSum(GemmKernel.NVFP4_DENSE, _TE_LAYER, 3.764e-3, _TE_B300 + ", NVFP4, pre-quantized", B300),
)


def blackwell_points(*kernels: GemmKernel) -> tuple[GemmPoint, ...]:
    """The Blackwell points of the given kernel families."""
    return tuple(p for p in BLACKWELL_POINTS if p.kernel in kernels)


def blackwell_sums(*kernels: GemmKernel) -> tuple[GemmSum, ...]:
    """The Blackwell layer sums of the given kernel families."""
    return tuple(s for s in BLACKWELL_SUMS if s.kernel in kernels)


# cuDNN's SDPA training benchmark on a GB200, BF16 and FP8 in one run: NVIDIA/cudnn-frontend@d48a60eb
# benchmark/sdpa_benchmark_training/artifacts/sdpa_fp8_benchmark_results_NVIDIA_GB200.csv (benchmark_fp8_sdpa.py: batch 1,
# 128 query heads, 8 KV heads, head dim 128, causal, forward and backward). Its TFLOP/s count a causal op as half the
# s^2 pairs and the backward as 2.5 forwards, as moesim does (simulator/costs/attention_cost.py). (dtype, direction)
# -> TFLOP/s per sequence length. The GB300 run of the same benchmark (sdpa_fp8_benchmark_results_NVIDIA_GB300.csv at
# 0b1577c8) is within -11% / +10% of it from 4,096 to 16,384 (BF16 1,445 / 942 forward / backward at 4,096 against
# 1,378 / 1,054 here; FP8 1,675 / 1,156 against 1,663 / 1,088) and far below it under 2,048 (a ~30 us floor per
# call: 0.049 ms at 512). That older pair is not one protocol (the two CSVs come from different commits); the paired
# run below is, and it sets Blackwell Ultra's own attention (CUDNN_GB300_OVER_GB200).
CUDNN_SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
CUDNN_GB200_TFLOPS: dict[tuple[str, str], tuple[float, ...]] = {
    ("bf16", "fwd"): (408.0, 733.0, 1068.0, 1378.0, 1583.0, 1673.0, 1687.0, 1592.0, 1471.0),
    ("bf16", "bwd"): (328.0, 528.0, 656.0, 1054.0, 1211.0, 1303.0, 1311.0, 1247.0, 1188.0),
    ("fp8", "fwd"): (470.0, 870.0, 1324.0, 1663.0, 1894.0, 2033.0, 2124.0, 2181.0, 2172.0),
    ("fp8", "bwd"): (301.0, 547.0, 671.0, 1088.0, 1263.0, 1373.0, 1429.0, 1450.0, 1440.0),
}
CUDNN_SOURCE = "NVIDIA/cudnn-frontend@d48a60eb benchmark/sdpa_benchmark_training/artifacts/sdpa_fp8_benchmark_results_NVIDIA_GB200.csv"

# Attention on B200, BF16. FlashAttention-4 (Zadouri, Hoehnerbach, Shah, Liu, Thakkar, Dao, arXiv 2603.05451,
# abstract): "up to 1613 TFLOPs/s (71% utilization)", "up to 1.3x speedup over cuDNN 9.13 and 2.7x over Triton on
# B200 GPUs with BF16" (the Together AI post of the same work: up to 1605 TFLOP/s). Forward; no backward figure read.
FA4_PEAK_TFLOPS = 1613.0
FA4_SOURCE = (
    "arXiv 2603.05451 (FlashAttention-4) abstract: up to 1613 TFLOP/s BF16 forward on B200, up to 1.3x cuDNN 9.13"
)

# Blackwell Ultra (SM103: B300, GB300) against Blackwell (SM100) on one protocol: cuDNN's SDPA training benchmark run
# on a GB200 and a GB300 the same day with the same cuDNN (frontend 1.21.1, backend 9.22.0): NVIDIA/cudnn-frontend@3929da2e
# benchmark/sdpa_benchmark_training/results/llama3.1/gb200/llama3.1_20260424_100750.csv and .../gb300/
# llama3.1_20260424_100757.csv (batch 2, 64 query / 8 KV heads, head dim 128, causal "top_left", non-deterministic
# backward). (dtype, direction) -> (GB200 ms, GB300 ms) per sequence length. The GB300 is faster at the same BF16
# peak (2.5 PF dense, both): forward 1.12-1.25x BF16, 1.39-1.42x FP8; backward 1.08-1.22x / 1.14-1.26x. The mechanism:
# "Blackwell Ultra ... doubling SFU throughput over the standard NVIDIA Blackwell architecture" for the softmax's
# MUFU.EX2, measured there as "~35%" higher FP8 forward throughput on DeepSeek-V3's attention (NVIDIA technical blog,
# "Making Softmax More Efficient with NVIDIA Blackwell Ultra", 2026); the FA4 paper (arXiv 2603.05451) finds B200's
# forward bound by the exponential, its backward by shared memory, which is why the forward gains most.
CUDNN_ULTRA_SEQ_LENS = (2048, 4096, 8192, 16384, 32768)
CUDNN_GB300_OVER_GB200: dict[tuple[str, str], tuple[tuple[float, ...], tuple[float, ...]]] = {
    ("bf16", "fwd"): ((0.125, 0.391, 1.397, 5.150, 21.692), (0.100, 0.323, 1.185, 4.593, 18.014)),
    ("bf16", "bwd"): ((0.389, 1.198, 4.127, 16.554, 71.756), (0.356, 1.101, 3.832, 14.593, 59.024)),
    ("fp8", "fwd"): ((0.097, 0.305, 1.074, 4.084, 16.012), (0.070, 0.217, 0.759, 2.880, 11.319)),
    ("fp8", "bwd"): ((0.414, 1.167, 3.781, 13.476, 52.155), (0.364, 0.985, 3.087, 10.805, 41.328)),
}
CUDNN_ULTRA_SOURCE = (
    "NVIDIA/cudnn-frontend@3929da2e sdpa_benchmark_training results/llama3.1 gb200 / gb300 20260424 (cuDNN 9.22); "
    "NVIDIA technical blog 'Making Softmax More Efficient with NVIDIA Blackwell Ultra' (2x MUFU.EX2)"
)
