"""Published GEMM measurements on Hopper (H800 / H100 SXM, 132 SMs), as DATA: one row per measured shape.
(Blackwell's are in simulator.costs.blackwell_points, in the same rows, each naming the GPU it was measured on.)

simulator.costs.gemm_efficiency turns them into full-wave tile efficiencies by K and a rows-per-group factor per
kernel family. A point's TFLOP/s counts 2 m n k FLOPs per group. Grouped points from benchmarks with
uneven groups are entered at their mean rows per group (total rows / groups); the padding of the uneven
groups' last tiles then lands in the measured efficiency.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class GemmKernel(Enum):
    """The kernel family a point measures; each family gets its own curve."""

    BF16_DENSE = "bf16 dense (cuBLAS)"
    BF16_GROUPED = "bf16 grouped (torch._grouped_mm, CUTLASS)"
    BF16_MULTI_STREAM = "bf16 grouped as one cuBLAS GEMM per group on TE's streams (TE GroupedLinear's default)"
    FP8_BLOCKWISE_DENSE = "fp8 1x128/128x128 dense and contiguous grouped (DeepGEMM)"
    FP8_BLOCKWISE_MASKED = "fp8 1x128/128x128 masked grouped (DeepGEMM)"
    FP8_ROWWISE_GROUPED = "fp8 rowwise grouped (torch._scaled_grouped_mm, CUTLASS)"
    FP8_TENSORWISE_DENSE = "fp8 per-tensor dense (torch._scaled_mm, cuBLAS)"
    MXFP8_DENSE = "mxfp8 1x32 block-scaled dense (cuBLAS, Blackwell)"
    MXFP8_GROUPED = "mxfp8 1x32 block-scaled grouped (torch._scaled_grouped_mm, CUTLASS, Blackwell)"
    NVFP4_DENSE = "nvfp4 1x16 block-scaled dense (cuBLAS, Blackwell)"


@dataclass(frozen=True)
class BenchGpu:
    """The GPU a point was measured on: the dense peaks and SM count its efficiency is taken against."""

    name: str
    peak_bf16_tflops: float
    peak_fp8_tflops: float
    sms: int
    peak_fp4_tflops: float = 0.0  # dense FP4; 0 before Blackwell


# H800 and H100 SXM: the same GH100 configuration and peaks (NVIDIA datasheets; topologies.hardware).
HOPPER_SXM = BenchGpu("H100 / H800 SXM", 989.0, 1979.0, 132)


@dataclass(frozen=True)
class GemmPoint:
    """One published measurement: ``groups`` GEMMs of (m x k) @ (k x n) at ``tflops`` on ``gpu``."""

    kernel: GemmKernel
    groups: int
    m: int  # rows per group
    n: int
    k: int
    tflops: float
    source: str
    gpu: BenchGpu = HOPPER_SXM

    @property
    def peak_tflops(self) -> float:
        """The dense peak of the point's GPU in the point's operand type (BF16, FP4, else FP8)."""
        return kernel_peak_tflops(self.kernel, self.gpu)


def kernel_peak_tflops(kernel: GemmKernel, gpu: BenchGpu) -> float:
    """The dense peak of ``gpu`` in the operand type of ``kernel``: what a measured time is an efficiency of."""
    if kernel in (GemmKernel.BF16_DENSE, GemmKernel.BF16_GROUPED, GemmKernel.BF16_MULTI_STREAM):
        return gpu.peak_bf16_tflops
    return gpu.peak_fp4_tflops if kernel == GemmKernel.NVFP4_DENSE else gpu.peak_fp8_tflops


def _tflops(total_rows: int, n: int, k: int, seconds: float) -> float:
    """TFLOP/s of a grouped benchmark that reports its time for ``total_rows`` rows in all."""
    return 2.0 * total_rows * n * k / seconds / 1e12


_DG = "deepseek-ai/DeepGEMM README, commit a6d97a1 (initial release), H800 SXM5"
# pytorch/ao PR #2490 (danielvegamyhre, 2025-07-03), benchmarks/float8/bench_grouped_mm.py on "NVIDIA H100":
# (M, K) @ (E, K, N), M = 8192 rows over E = 16 experts at uneven offsets (mean 512). The script's printed
# TFLOP/s counts E times the FLOPs (1.10e13 for 6.87e11); the times are taken: 1.31 ms and 1.26 ms.
_AO_2490 = "pytorch/ao PR #2490 (2025-07-03), torch._grouped_mm bf16, H100"
# pytorch/ao PR #2756 (danielvegamyhre, 2025-08-13), "torch._scaled_grouped_mm (fp8 rowwise) vs
# torch._grouped_mm (bf16)", Llama 4 shapes, M = 16640 rows over E = 16 (mean 1040): bf16 2.331 / 2.424 ms,
# fp8 rowwise 1.514 / 1.559 ms (time_s column and time_s / fp8_speedup). The GPU is the H100 of the PR stack
# (#2490; FP8 rowwise grouped GEMMs were SM90-only in torch then).
_AO_2756 = "pytorch/ao PR #2756 (2025-08-13), Llama 4 16e shapes, H100"
# NVIDIA/TransformerEngine PR #2045 (cassiewilliam, merged for TE 2.8; the table "updated by @yaox12": TE 2.7, CUDA
# 12.9), "Add Cutlass GroupGEMM Support for fine-grained MoE Model" on H100 (SM90), BF16, tests/pytorch/
# test_group_gemm.py (commit 4ac7be8): shape (g, m, n, k) = g equal groups of m rows (its m_splits), n outputs,
# reduction k, TFLOP/s = 2 m n k g / time. The CUTLASS column is TE's grouped kernel (NVTE_USE_CUTLASS_GROUPED_GEMM=1,
# what SonicMoE's Megatron benchmark runs): 650.574 at (8, 4096, 768, 2048), 636.927 at (16, 2048, 768, 2048). Its
# "TE V2.7" column, measured beside it, is the multi-stream cuBLAS path (GroupedLinear's default, what
# --moe-grouped-gemm runs unless NVTE_USE_CUTLASS_GROUPED_GEMM=1, and the only path for FP8): 627.903 and 553.945,
# entered as BF16_MULTI_STREAM (simulator/costs/gemm_efficiency.py multi_stream_factor).
_TE_2045 = "NVIDIA/TransformerEngine PR #2045 (2025-08-08), TE 2.7 CUTLASS grouped GEMM, CUDA 12.9, H100"
# Looked for and not entered (issue #11, small MoE shapes): tgale96/grouped_gemm PR #37 (2026-03-03, H100, Qwen3-30B
# up_proj, 128 experts, K 2048, N 1536, 65,536 tokens: CUTLASS SM90 cooperative 160.5 TFLOP/s, 4x under TE #2045's
# CUTLASS at the same K; how it was timed is not stated); tile-ai/TileOPs PRs #1567 and #2148 (H200, not an
# H100/H800; torch.bmm (8, 1024, 1024, 1024) 0.0307 ms, (16, 512, 512, 512) 0.0119 ms); ByteDance-Seed/VeOmni PR
# #460 and KempnerInstitute/KempnerForge PR #201 (whole MoE layers, not kernels); TransformerEngine PR #3069 (BF16
# varlen-K wgrad on H100 at hidden 2048, expert 512: its table is not in the stored copy). No published BF16 point
# on H100/H800 below K = 2048 was found, so the assumed extension below K = 2048 (gemm_efficiency.extend_down) stays.

# fmt: off
GEMM_POINTS: tuple[GemmPoint, ...] = (
    # DeepGEMM README: "Normal GEMMs for dense models", M = 4096 rows
    GemmPoint(GemmKernel.FP8_BLOCKWISE_DENSE, 1, 4096, 24576, 1536, 990.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_DENSE, 1, 4096, 32768, 512, 590.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_DENSE, 1, 4096, 7168, 16384, 1358.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_DENSE, 1, 4096, 4096, 7168, 1304.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_DENSE, 1, 4096, 2112, 7168, 1058.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_DENSE, 1, 4096, 7168, 2048, 1025.0, _DG),
    # same README, "Grouped GEMMs for MoE models (contiguous layout)": 4096+ rows per group, no rows loss
    GemmPoint(GemmKernel.FP8_BLOCKWISE_DENSE, 4, 8192, 4096, 7168, 1297.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_DENSE, 4, 8192, 7168, 2048, 1099.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_DENSE, 8, 4096, 4096, 7168, 1288.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_DENSE, 8, 4096, 7168, 2048, 1093.0, _DG),
    # same README, "Grouped GEMMs for MoE models (masked layout)": few rows per group
    GemmPoint(GemmKernel.FP8_BLOCKWISE_MASKED, 1, 1024, 4096, 7168, 1233.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_MASKED, 1, 1024, 7168, 2048, 925.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_MASKED, 2, 512, 4096, 7168, 1040.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_MASKED, 2, 512, 7168, 2048, 916.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_MASKED, 4, 256, 4096, 7168, 932.0, _DG),
    GemmPoint(GemmKernel.FP8_BLOCKWISE_MASKED, 4, 256, 7168, 2048, 815.0, _DG),
    # BF16 dense, torch.matmul (cuBLAS). MAMF finder, H100 SXM, best shape 2048 x 2048 x 13312
    # (stas00/ml-engineering compute/accelerator/README.md, commit 744d01e).
    GemmPoint(GemmKernel.BF16_DENSE, 1, 2048, 2048, 13312, 794.5, "ml-engineering MAMF H100 SXM 744d01e"),
    # zzc0721/torch-performance-test-data issue #79 (2025-10-18), "NVIDIA H100 80GB HBM3" (SXM), torch 2.7.0
    # cu128, square BF16 matmuls. (The 1024^3 point, 64 tiles on 132 SMs in ~12 us, measures launch latency,
    # not the tile. 10240^3, 719.7, is left out: 8% under its neighbours' tile efficiency, a 2.8 ms GEMM that
    # likely meets the power cap; sustained clocks are a separate item of issue #11, not a shape effect.)
    GemmPoint(GemmKernel.BF16_DENSE, 1, 2048, 2048, 2048, 676.59, "zzc0721/torch-performance-test-data #79"),
    GemmPoint(GemmKernel.BF16_DENSE, 1, 4096, 4096, 4096, 788.72, "zzc0721/torch-performance-test-data #79"),
    GemmPoint(GemmKernel.BF16_DENSE, 1, 8192, 8192, 8192, 797.51, "zzc0721/torch-performance-test-data #79"),
    # BF16 grouped: torch._grouped_mm (CUTLASS grouped GEMM), routed-expert shapes of Llama 4 17Bx16E
    GemmPoint(GemmKernel.BF16_GROUPED, 16, 512, 8192, 5120, _tflops(8192, 8192, 5120, 1.31e-3), _AO_2490),
    GemmPoint(GemmKernel.BF16_GROUPED, 16, 512, 5120, 8192, _tflops(8192, 5120, 8192, 1.26e-3), _AO_2490),
    GemmPoint(GemmKernel.BF16_GROUPED, 16, 1040, 8192, 5120, _tflops(16640, 8192, 5120, 2.331e-3), _AO_2756),
    GemmPoint(GemmKernel.BF16_GROUPED, 16, 1040, 5120, 8192, _tflops(16640, 5120, 8192, 2.424e-3), _AO_2756),
    GemmPoint(GemmKernel.BF16_GROUPED, 8, 4096, 768, 2048, 650.574, _TE_2045),
    GemmPoint(GemmKernel.BF16_GROUPED, 16, 2048, 768, 2048, 636.927, _TE_2045),
    GemmPoint(GemmKernel.BF16_MULTI_STREAM, 8, 4096, 768, 2048, 627.903, _TE_2045),
    GemmPoint(GemmKernel.BF16_MULTI_STREAM, 16, 2048, 768, 2048, 553.945, _TE_2045),
    # FP8 per-tensor dense, torch._scaled_mm (cuBLAS): the MAMF finder's best FP8 shape on H100 SXM, torch 2.7.0
    # cu126 (stas00/ml-engineering compute/accelerator/README.md at 744d01e, the FP8 MAMF table: 1402.6 of 1979,
    # 70.9%; H200 SXM 1453.4 at 1280 x 4096 x 12032, not entered: its tile fit is not this table's 128 x 128)
    GemmPoint(GemmKernel.FP8_TENSORWISE_DENSE, 1, 1024, 9216, 14336, 1402.6, "ml-engineering MAMF H100 SXM FP8 744d01e"),
    # FP8 rowwise grouped (per-row / per-column scales applied in the epilogue, as per-tensor ones are)
    GemmPoint(GemmKernel.FP8_ROWWISE_GROUPED, 16, 1040, 8192, 5120, _tflops(16640, 8192, 5120, 1.514e-3), _AO_2756),
    GemmPoint(GemmKernel.FP8_ROWWISE_GROUPED, 16, 1040, 5120, 8192, _tflops(16640, 5120, 8192, 1.559e-3), _AO_2756),
)
# fmt: on


# A100 SXM 80 GB: the GA100's dense BF16 peak (no FP8 tensor cores) and SMs (NVIDIA A100 datasheet; topologies.hardware).
A100_SXM = BenchGpu("A100 SXM", 312.0, 312.0, 108)
# The MAMF finder's best BF16 shape on an A100 SXM: 271.2 TFLOP/s at 1024 x 10240 x 5120, torch 2.6.0+cu126, 86.9% of
# 312 (stas00/ml-engineering compute/accelerator/README.md at 744d01e, the BF16 MAMF table, whose H100 SXM point is in
# GEMM_POINTS). Apart from them: it levels Ampere's table (gemm_efficiency.ampere_gemm_table), not Hopper's curve.
A100_MAMF = GemmPoint(
    GemmKernel.BF16_DENSE, 1, 1024, 10240, 5120, 271.2, "ml-engineering MAMF A100 SXM 744d01e", A100_SXM
)


def points(kernel: GemmKernel) -> tuple[GemmPoint, ...]:
    """The published points of one kernel family."""
    return tuple(p for p in GEMM_POINTS if p.kernel == kernel)
