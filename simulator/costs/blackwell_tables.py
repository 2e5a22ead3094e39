"""Blackwell's kernel tables, from Blackwell's own measurements (simulator.costs.blackwell_points).

GEMMs. Per precision, the published points and layer sums as full-wave tile efficiencies of the GPU they were
measured on (its own peak and SM count), made a monotone curve in K as Hopper's are (gemm_efficiency.monotone_mean).
A layer sum enters once, at the FLOP-weighted geometric mean of its K, with the one efficiency that reproduces its
total time. From K = 1,024 to 16,384 the Blackwell points do not rise with K (the best-shape MAMF points at 1,024 to
3,072 sit above the transformer-layer shapes at 4,096 to 16,384), so the monotone fit pools them into one level.
Below the smallest published K, Hopper's curve of the same kernel family gives the fall, read at the K of equal
main-loop time: a Blackwell SM runs BF16 and FP8 MMAs at 2.03x a Hopper SM (B200 2,250 TFLOP/s over 148 SMs
against H100 989 over 132), so a Blackwell tile of depth K is taken to pay its fixed per-tile cost like a Hopper
tile of depth 0.49 K (assumed, as gemm_efficiency.extend_down does for BF16 against FP8).

MXFP8 (and FP8 blockwise, which TE runs as MXFP8 on SM100: "On Blackwell (SM100+), FP8 Block is emulated via MXFP8",
NVIDIA/TransformerEngine@d0067d0d docs/examples/gemm_profiling/gemm_profiling.rst, so the two share one curve): TE's
own measurement of the cuBLAS GEMMs Megatron-Core runs. The same page times the same 12 GEMMs of one layer on the same
B300 pre-quantized in both recipes, MXFP8 7.161 ms against FP8 current scaling 6.812 ms, so the MXFP8 curve is the FP8
per-tensor curve (cuBLAS, the same tensor cores at the same FP8 rate) at that measured ratio, 0.951, at every K
(``te_pair_ratio``). MXFP8's absolute layer sum is not entered on its own: the per-tensor curve is pooled with the
MAMF best shapes (0.74 of peak) above TE's own per-tensor layer (0.63), and leveling MXFP8 alone at its layer (0.60)
would put it 0.81x per-tensor where TE measures 0.95x. torchao's MXFP8 grouped GEMM on B200 (0.47 of peak) is not in
the curve: it times torch._scaled_grouped_mm, PyTorch's CUTLASS kernel that torchao's MoE training calls, not the
cuBLAS GEMMs of TE's GroupedLinear (NVIDIA/TransformerEngine@d0067d0d transformer_engine/common/gemm/cublaslt_gemm.cu
nvte_multi_tensor_gemm: "Currently only support cutlass group gemm on Hopper Arch", else multi-stream cuBLAS; its
grouped-tensor path is cuBLASLt's grouped GEMM, cublaslt_grouped_gemm.cu). It is printed beside moesim's time for
the same shape (experiments/validation/blackwell/check.py), not fitted. Pooling the two, as before, put MXFP8 at
0.47 of peak from K 2,048 to 7,168 and Llama 3 8B's MXFP8 / FP8-CS at 0.86x against 0.95-0.96x measured.

Grouped GEMMs: Hopper's rows-per-group factors (assumed: no Blackwell grouped GEMM below 4,096 rows per group was
found published), and where they run as Transformer Engine's GroupedLinear (``--moe-grouped-gemm``), one cuBLAS GEMM
per expert on TE's streams at Hopper's measured share of one grouped kernel (gemm_efficiency.multi_stream_factor):
TE takes that path on Blackwell for every precision, its CUTLASS grouped kernel being Hopper-only
(NVIDIA/TransformerEngine@4220403, the TE of Megatron-Bridge v0.5.0: transformer_engine/common/gemm/cublaslt_gemm.cu
nvte_multi_tensor_gemm runs cutlass_grouped_gemm only ``if (is_hopper && use_cutlass)``; pytorch/module/
grouped_linear.py calls general_grouped_gemm, that function). Assumed: the share depends on the FLOPs per expert as
measured on an H100, where the same FLOPs take about half the time on a Blackwell GPU (keyed by the GEMM's time
instead, no row of the Blackwell check moves by 0.8 points more). Before stop 73 Blackwell took no such share: its MoE
rows ran up to 2.1 points faster (none slower).

NVFP4 (Megatron-LM's --fp4-format) as MXFP8 is made: the same page times the same 12 GEMMs of the same
B300 pre-quantized as NVFP4 in 3.764 ms, so the NVFP4 curve is the MXFP8 curve at that measured ratio (each over its
own dense peak, FP4 12.6 and FP8 4.5 PFLOP/s: 0.714) at every K, and the layer's 12 GEMMs keep TE's 1.90x. Leveled at
its own layer alone (0.41 of the FP4 peak, until issue 40's stop 50) it ran 1.63x MXFP8 there, and Megatron-Bridge's
Llama 3 70B NVFP4 / MXFP8 pairs (26.04.01, experiments/validation/blackwell/check.py) came out 1.37x on GB300 (1.50x
measured) and 1.05x on GB200 (1.31x); now 1.50x and 1.16x. A check, not in the curve: cuBLASLt's block-scaled FP4
GEMM with MXFP4 scales on B200 (deepseek-ai/DeepGEMM PR #348, cublasTest 13.3) runs 8192^3 at 5,239 TFLOP/s and
4,096 x 4,096 x 7,168 at 3,939, where this curve gives 4,234 and 4,115 (experiments/validation/blackwell/check.py
prints them).

Attention: cuDNN's own SDPA training benchmark on GB200 (NVIDIA/cudnn-frontend, BF16 and FP8, forward and backward,
512 to 131,072 tokens, head dim 128, causal) sets cuDNN's level per direction and sequence length; FlashAttention-4's
forward peak on B200 (arXiv 2603.05451) sets FA4's one level. The dependence on head dim and mask is the Hopper
table's of the same family (FA3 for FA4), assumed: no Blackwell table by head dim was found. FA3 itself
does not run on Blackwell (flash-attention's hopper/ kernels are built for SM90), so a layout asking for "fa3" gets
FlashAttention's Blackwell kernel, FA4.

Blackwell Ultra (B300, GB300): the same GEMM table (its B300 points are pooled in it) and Blackwell's attention sped up
by cuDNN's own GB300 / GB200 time ratio, same day, same cuDNN, per precision, direction and sequence length
(blackwell_points.CUDNN_GB300_OVER_GB200): the two GPUs have the same dense peaks, and Blackwell Ultra's doubled SFU
exponential throughput is what the ratio measures.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

from simulator.costs.blackwell_points import (
    B200,
    B300,
    CUDNN_GB200_TFLOPS,
    CUDNN_GB300_OVER_GB200,
    CUDNN_SEQ_LENS,
    CUDNN_SOURCE,
    CUDNN_ULTRA_SEQ_LENS,
    CUDNN_ULTRA_SOURCE,
    FA4_PEAK_TFLOPS,
    FA4_SOURCE,
    GB200,
    MAMF_SOURCE,
    GemmSum,
    blackwell_points,
    blackwell_sums,
)
from simulator.costs.gemm_efficiency import (
    ATTENTION_TFLOPS,
    HOPPER_GEMM_TABLE,
    Curve,
    GemmEfficiencyTable,
    KernelCurve,
    attention_efficiency,
    extend_down,
    interpolate_log,
    monotone_mean,
    point_efficiency,
    wave_fraction,
)
from simulator.costs.gemm_points import HOPPER_SXM, GemmKernel, kernel_peak_tflops

# Hopper tile depth of equal main-loop time per unit of Blackwell's (module docstring): per-SM rates, B200 / H100.
K_SCALE = (HOPPER_SXM.peak_bf16_tflops / HOPPER_SXM.sms) / (B200.peak_bf16_tflops / B200.sms)


def sum_efficiency(bench: GemmSum) -> float:
    """The one full-wave tile efficiency at which every GEMM of ``bench`` together takes its published time."""
    peak = kernel_peak_tflops(bench.kernel, bench.gpu)
    work = sum(2.0 * m * n * k / wave_fraction(m, n, 1, bench.gpu.sms) for m, n, k in bench.shapes)
    return work / (peak * 1e12 * bench.seconds)


def sum_k(bench: GemmSum) -> float:
    """The FLOP-weighted geometric mean of the K of ``bench``'s GEMMs: where its efficiency enters the K curve."""
    flops = [2.0 * m * n * k for m, n, k in bench.shapes]
    return math.exp(sum(f * math.log(k) for f, (_, _, k) in zip(flops, bench.shapes)) / sum(flops))


def k_curve(kernel: GemmKernel, hopper: Curve) -> Curve:
    """The Blackwell points and sums of one kernel family as a monotone curve in K, Hopper's fall below its smallest
    K. One family per curve: points of different kernel implementations are never pooled into one level."""
    rows = [(p.k, point_efficiency(p)) for p in blackwell_points(kernel)]
    rows += [(sum_k(s), sum_efficiency(s)) for s in blackwell_sums(kernel)]
    return extend_down(monotone_mean(rows), hopper, K_SCALE)


def te_pair_ratio(kernel: GemmKernel, reference: GemmKernel) -> float:
    """``kernel``'s layer-sum efficiency over ``reference``'s where one benchmark timed both on the same GEMMs of the
    same GPU (TE's gemm_profiling, B300): a measured ratio of two kernel families, free of either's absolute level."""
    (bench,), (ref,) = blackwell_sums(kernel), blackwell_sums(reference)
    if bench.shapes != ref.shapes or bench.gpu != ref.gpu:
        raise ValueError(f"{kernel.value} and {reference.value} were not timed on the same GEMMs and GPU")
    return sum_efficiency(bench) / sum_efficiency(ref)


def blackwell_gemm_table() -> GemmEfficiencyTable:
    """BF16, FP8 per-tensor and MXFP8 (= FP8 blockwise) curves from Blackwell's points; Hopper's rows factors."""
    hopper = HOPPER_GEMM_TABLE
    bf16 = k_curve(GemmKernel.BF16_DENSE, hopper.bf16.by_k)
    tensorwise = k_curve(GemmKernel.FP8_TENSORWISE_DENSE, hopper.fp8_tensorwise.by_k)
    # MXFP8: the per-tensor curve at TE's same-run MXFP8 / FP8-current ratio (7.161 against 6.812 ms, module docstring);
    # torchao's grouped MXFP8 point (GemmKernel.MXFP8_GROUPED, another kernel) stays out of it
    ratio = te_pair_ratio(GemmKernel.MXFP8_DENSE, GemmKernel.FP8_TENSORWISE_DENSE)
    mxfp8 = KernelCurve(tuple((k, y * ratio) for k, y in tensorwise), hopper.fp8_blockwise.rows_factor)
    # NVFP4: the MXFP8 curve at TE's same-run NVFP4 / MXFP8 ratio (3.764 against 7.161 ms on the same GEMMs, each over
    # its own peak: module docstring), MXFP8's rows factor
    fp4_ratio = te_pair_ratio(GemmKernel.NVFP4_DENSE, GemmKernel.MXFP8_DENSE)
    nvfp4 = KernelCurve(tuple((k, y * fp4_ratio) for k, y in mxfp8.by_k), mxfp8.rows_factor)
    return GemmEfficiencyTable(
        bf16=KernelCurve(bf16, hopper.bf16.rows_factor),
        fp8_tensorwise=KernelCurve(tensorwise, hopper.fp8_tensorwise.rows_factor),
        fp8_blockwise=mxfp8,
        fp8_mxfp8=mxfp8,
        nvfp4=nvfp4,
        multi_stream=hopper.multi_stream,  # TE GroupedLinear's per-expert cuBLAS GEMMs (module docstring)
        source="simulator/costs/blackwell_points.py: MAMF 744d01e (B200, GB200, B300; BF16, FP8); TransformerEngine "
        "d0067d0d gemm_profiling (B300; MXFP8 as its MXFP8 / FP8-current ratio on the FP8 curve, NVFP4 as its NVFP4 / "
        "MXFP8 ratio on the MXFP8 curve); pytorch/ao #2427 "
        "(B200); below the smallest K, by rows per group and TE's per-expert GEMMs' share, Hopper's (assumed)",
    )


BLACKWELL_GEMM_TABLE = blackwell_gemm_table()

# The GPU presets whose own best-shape MAMF points are in the table (topologies.hardware name -> bench GPU)
MAMF_GPUS = {"b200": B200, "gb200": GB200, "b300": B300}


@cache
def mamf_level(gpu_name: str, kernel: GemmKernel) -> float:
    """A Blackwell GPU's GEMM speed relative to the pooled table, from its own best-shape MAMF point (one protocol,
    stas00/ml-engineering's MAMF finder, on every GPU): the point's efficiency over the mean of the MAMF points of
    the same family. The table is a fraction of each GPU's datasheet peak, and the datasheets quote their peaks at
    clocks that differ from GPU to GPU (ByteDance-Seed/VeOmni PR #986: B200 2,250 TFLOP/s against 148 SMs x 8,192 x
    1.965 GHz = 2,382 at its boost clock, GB200 2,500 against 2,565): the MAMF finder reaches 0.78 of the B200's
    BF16 peak, 0.73 of the GB200's, 0.79 of the B300's (FP8: 0.76, 0.72, 0.83), so a GB200 runs the same GEMMs at
    1,822 / 1,745 = 1.04x a B200 (FP8 1.05x), not the datasheets' 1.11x. 1 for a GPU with no MAMF point of its own
    (the GB300: the pooled level)."""
    bench = MAMF_GPUS.get(gpu_name)
    if bench is None:
        return 1.0
    mamf = {p.gpu: point_efficiency(p) for p in blackwell_points(kernel) if p.source.startswith(MAMF_SOURCE)}
    return mamf[bench] / (sum(mamf.values()) / len(mamf)) if bench in mamf else 1.0


def _hopper_peak(family: str) -> float:
    """The highest forward TFLOP/s of a Hopper family's head-dim-128 rows: what a Blackwell peak is matched to."""
    return max(max(v) for (f, d, _, h), v in ATTENTION_TFLOPS.items() if (f, d, h) == (family, "fwd", 128))


def cudnn_tflops(dtype: str, backward: bool, seq_len: float) -> float:
    """cuDNN's published GB200 TFLOP/s at head dim 128, causal, log-interpolated over sequence length."""
    measured = CUDNN_GB200_TFLOPS[(dtype, "bwd" if backward else "fwd")]
    return interpolate_log(tuple(zip(map(float, CUDNN_SEQ_LENS), measured)), seq_len)


def _cudnn_ratio(dtype: str) -> Callable[[bool, float], float]:
    """Blackwell cuDNN (``dtype`` inputs) over Hopper cuDNN, both at head dim 128 and causal, per direction and
    sequence length: what scales Hopper's cuDNN shape to Blackwell's measured level."""

    def ratio(backward: bool, seq_len: float) -> float:
        hopper = attention_efficiency("cudnn", backward, True, 128, seq_len) * HOPPER_SXM.peak_bf16_tflops
        return cudnn_tflops(dtype, backward, seq_len) / hopper

    return ratio


def _fa4_ratio(backward: bool, seq_len: float) -> float:
    return FA4_PEAK_TFLOPS / _hopper_peak("fa3")


# Blackwell attention families: (the Hopper family whose shape dependence is used, Blackwell TFLOP/s over that
# family's Hopper TFLOP/s by direction and sequence length, the GPU the Blackwell numbers were measured on).
# FA4: its 1613 TFLOP/s forward peak on B200 matched to FA3's head-dim-128 forward peak (648), one ratio for both
# directions and every length (no FA4 backward read). cuDNN: its own GB200 benchmark (CUDNN_GB200_TFLOPS) over
# Hopper cuDNN at the same length and direction, so a causal head-dim-128 op reproduces the benchmark and other
# head dims and masks keep Hopper's relative shape (assumed). "cudnn-fp8": cuDNN's FP8 attention, which TE runs
# under fp8_dpa (Megatron-Core TransformerConfig.fp8_dot_product_attention, passed to TE's MXFP8BlockScaling /
# Float8CurrentScaling recipe as fp8_dpa: NVIDIA/Megatron-LM@d98e8a64 megatron/core/fp8_utils.py), from the FP8 rows
# of the same run, timed on the same counted FLOPs against the BF16 peak. FA2: its SM80 kernel does not use
# Blackwell's tensor-core (tcgen05) instructions; assumed as fast in TFLOP/s as on Hopper.
BLACKWELL_ATTENTION: dict[str, tuple[str, Callable[[bool, float], float], float]] = {
    "fa3": ("fa3", _fa4_ratio, B200.peak_bf16_tflops),  # FA3 is SM90-only: FlashAttention's Blackwell kernel, FA4
    "cudnn": ("cudnn", _cudnn_ratio("bf16"), GB200.peak_bf16_tflops),
    "cudnn-fp8": ("cudnn", _cudnn_ratio("fp8"), GB200.peak_bf16_tflops),
    "fa2": ("fa2", lambda backward, seq_len: 1.0, B200.peak_bf16_tflops),
}
BLACKWELL_ATTENTION_SOURCE = (
    FA4_SOURCE + "; " + CUDNN_SOURCE + "; shapes from the FlashAttention-3 paper's Hopper figures (assumed)"
)


def blackwell_attention_efficiency(family: str, backward: bool, causal: bool, head_dim: float, seq_len: float) -> float:
    """Fraction of the BF16 peak an attention kernel reaches at a shape, on the Blackwell GPU its numbers were
    measured on (the same fraction on another Blackwell GPU)."""
    if family not in BLACKWELL_ATTENTION:
        raise ValueError(
            f"attention kernel family on Blackwell must be one of {tuple(BLACKWELL_ATTENTION)}, got {family!r}"
        )
    hopper_family, ratio, measured_peak_tflops = BLACKWELL_ATTENTION[family]
    hopper = attention_efficiency(hopper_family, backward, causal, head_dim, seq_len)
    return hopper * HOPPER_SXM.peak_bf16_tflops * ratio(backward, seq_len) / measured_peak_tflops


# Which of cuDNN's GB300 / GB200 ratios speeds up a family on Blackwell Ultra: cuDNN's own per precision; FA4 the BF16
# one (assumed: no FA4 run on a B300 / GB300 was found published; its forward is bound by the same MUFU.EX2 on B200,
# arXiv 2603.05451); FA2 none (assumed, as its Blackwell level is Hopper's).
_ULTRA_DTYPE: dict[str, str | None] = {"fa3": "bf16", "cudnn": "bf16", "cudnn-fp8": "fp8", "fa2": None}


def blackwell_ultra_speedup(family: str, backward: bool, seq_len: float) -> float:
    """cuDNN's GB200 time over its GB300 time at head dim 128, causal, log-interpolated over sequence length (flat
    beyond 2,048 and 32,768), for the family's precision; 1 for a family no ratio applies to."""
    dtype = _ULTRA_DTYPE.get(family)
    if dtype is None:
        return 1.0
    gb200, gb300 = CUDNN_GB300_OVER_GB200[(dtype, "bwd" if backward else "fwd")]
    ratios = tuple((float(s), a / b) for s, a, b in zip(CUDNN_ULTRA_SEQ_LENS, gb200, gb300))
    return interpolate_log(ratios, seq_len)


def blackwell_ultra_attention_efficiency(
    family: str, backward: bool, causal: bool, head_dim: float, seq_len: float
) -> float:
    """Blackwell's efficiency of the family at the shape times Blackwell Ultra's measured speedup over Blackwell."""
    base = blackwell_attention_efficiency(family, backward, causal, head_dim, seq_len)
    return base * blackwell_ultra_speedup(family, backward, seq_len)


BLACKWELL_ULTRA_ATTENTION_SOURCE = BLACKWELL_ATTENTION_SOURCE + "; Blackwell Ultra: " + CUDNN_ULTRA_SOURCE
