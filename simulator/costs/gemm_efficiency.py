"""Kernel efficiencies by shape: the interpolation that reads published points (simulator.costs.gemm_points).

GEMMs: the fraction of the tensor-core peak one SM reaches on a full wave of 128 x 128 tiles, as a
function of the reduction depth K (the per-tile prologue / epilogue is amortized over K), per kernel
family; grouped GEMMs also by rows per group (each group's weights are streamed for few rows). Attention:
FlashAttention-3 (default), FlashAttention-2 or cuDNN by head dim, sequence length, causal mask,
direction.

Every point here is a published measurement on Hopper (H800 / H100 SXM, 132 SMs); Blackwell's own tables are
built from its measurements in simulator.costs.blackwell_tables, and simulator.costs.generations picks a GPU's
tables by its generation (Ampere: Hopper's at the level of the A100's one published point, ampere_gemm_table).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace

from simulator.costs.gemm_points import A100_MAMF, GemmKernel, GemmPoint, points
from workloads.ops import GemmPrecision

BF16 = "bf16"
FP8 = "fp8"

# Peaks and SM count of the GPUs the points were measured on (H800 / H100 SXM, NVIDIA datasheets).
_HOPPER_PEAK_FLOPS = {BF16: 989e12, FP8: 1979e12}
_HOPPER_SMS = 132
_TILE = 128  # CUTLASS / cuBLAS / DeepGEMM Hopper tile edge used to divide out wave quantization
# Rows per group from which a grouped GEMM runs as fast as a dense one of the same K (assumed: DeepGEMM's
# contiguous layout at 4096+ rows per group matches its dense GEMMs, README a6d97a1; on B200, pytorch/ao
# PR #2999 (2025-09-13) measures 8 groups of 2048 rows at 1192.7 us against one GEMM of 16384 rows at 1236.1).
_DENSE_ROWS = 4096.0

Curve = tuple[tuple[float, float], ...]


def wave_fraction(m: int, n: int, groups: int = 1, sms: int = _HOPPER_SMS, tile: int = _TILE) -> float:
    """Useful output share of the waves a (grouped) GEMM occupies: m n groups / (waves x SMs x tile^2)."""
    tiles = math.ceil(m / tile) * math.ceil(n / tile) * groups
    return m * n * groups / (math.ceil(tiles / sms) * sms * tile * tile)


def point_efficiency(point: GemmPoint) -> float:
    """A measured point as a full-wave tile efficiency: TFLOP/s / its GPU's peak / wave fraction on its GPU's SMs."""
    return point.tflops / point.peak_tflops / wave_fraction(point.m, point.n, point.groups, point.gpu.sms)


def interpolate_log(points: Curve, x: float) -> float:
    """Piecewise-linear in log(x) through sorted (x, y) points, flat beyond the ends (monotone between)."""
    xs = [p[0] for p in points]
    if x <= xs[0]:
        return points[0][1]
    if x >= xs[-1]:
        return points[-1][1]
    i = bisect.bisect_right(xs, x)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    t = math.log(x / x0) / math.log(x1 / x0)
    return y0 + t * (y1 - y0)


def monotone_mean(rows: list[tuple[float, float]]) -> Curve:
    """(x, y) samples as a non-decreasing curve: the mean at each x, then adjacent violators pooled, each x
    weighing alike (the least-squares monotone fit of the means; where they already rise, they are kept)."""
    by_x: dict[float, list[float]] = {}
    for x, y in rows:
        by_x.setdefault(float(x), []).append(y)
    blocks: list[list[float]] = []  # [sum of the means, number of x, first x index]
    xs = sorted(by_x)
    for i, x in enumerate(xs):
        blocks.append([sum(by_x[x]) / len(by_x[x]), 1, i])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count, _ = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    ys: list[float] = []
    for j, (total, count, first) in enumerate(blocks):
        last = blocks[j + 1][2] if j + 1 < len(blocks) else len(xs)
        ys.extend([total / count] * (last - first))
    return tuple(zip(xs, ys))


def _k_curve(kernel: GemmKernel) -> Curve:
    """Tile efficiency by K of a dense kernel family: its points, waves divided out, made monotone."""
    return monotone_mean([(p.k, point_efficiency(p)) for p in points(kernel)])


def extend_down(curve: Curve, shape: Curve, scale_k: float) -> Curve:
    """``curve`` below its smallest K, following ``shape``'s K dependence at ``scale_k`` x K.

    Used for BF16 below the smallest published K (2048): the per-tile fixed cost (pipeline fill, epilogue
    of 128 x 128 outputs) takes the same time in both dtypes while the BF16 main loop runs at half the FP8
    rate, so a BF16 tile of depth K looks like an FP8 tile of depth 2K (assumed).
    """
    k0, y0 = curve[0]
    anchor = interpolate_log(shape, scale_k * k0)
    below = tuple((x / scale_k, y0 * y / anchor) for x, y in shape if x / scale_k < k0)
    return below + curve


def _level_to(curve: Curve, measured: tuple[GemmPoint, ...]) -> Curve:
    """``curve``'s K dependence at the level of ``measured`` points of another kernel family: scaled by their
    mean efficiency over the curve's at their K (a family with too few points for a shape of its own)."""
    scale = sum(point_efficiency(p) / interpolate_log(curve, p.k) for p in measured) / len(measured)
    return tuple((k, y * scale) for k, y in curve)


def _rows_factor(grouped: tuple[GemmPoint, ...], dense: Curve) -> Curve:
    """Rows-per-group factor: each grouped point over the dense curve at its K, made monotone in rows, capped
    at 1; where no point reaches _DENSE_ROWS rows per group the curve rises to 1 there (the assumption), where
    one does its measured factor stands (flat beyond)."""
    rows = [(p.m, point_efficiency(p) / interpolate_log(dense, p.k)) for p in grouped]
    curve = tuple((m, min(f, 1.0)) for m, f in monotone_mean(rows))
    return curve if curve[-1][0] >= _DENSE_ROWS else (*curve, (_DENSE_ROWS, 1.0))


@dataclass(frozen=True)
class KernelCurve:
    """One kernel family: full-wave tile efficiency by K, times a factor by rows per group when grouped."""

    by_k: Curve
    rows_factor: Curve = ((1.0, 1.0),)

    def efficiency(self, k: int, rows_per_group: int | None = None) -> float:
        eff = interpolate_log(self.by_k, k)
        if rows_per_group is not None:
            eff *= interpolate_log(self.rows_factor, rows_per_group)
        return eff


@dataclass(frozen=True)
class GemmEfficiencyTable:
    """A kernel curve per GEMM precision (BF16, and FP8 by scaling recipe)."""

    bf16: KernelCurve
    fp8_tensorwise: KernelCurve
    fp8_blockwise: KernelCurve
    fp8_mxfp8: KernelCurve
    source: str = ""
    nvfp4: KernelCurve | None = None  # None: no FP4 tensor cores (before Blackwell)
    # A grouped GEMM run as one GEMM per group on several streams (Transformer Engine's GroupedLinear), against one
    # grouped kernel, by FLOPs per group (``multi_stream_factor``); None: not measured for this table's GPUs.
    multi_stream: Curve | None = None

    def curve(self, precision: GemmPrecision) -> KernelCurve:
        if precision == GemmPrecision.NVFP4:
            if self.nvfp4 is None:
                raise ValueError("NVFP4 GEMMs need a table with FP4 points (Blackwell)")
            return self.nvfp4
        return {
            GemmPrecision.BF16: self.bf16,
            GemmPrecision.FP8_TENSORWISE: self.fp8_tensorwise,
            GemmPrecision.FP8_BLOCKWISE: self.fp8_blockwise,
            GemmPrecision.FP8_MXFP8: self.fp8_mxfp8,
        }[precision]

    def tile_efficiency(self, k: int, precision: GemmPrecision, rows_per_group: int | None = None) -> float:
        """Efficiency of a full wave of tiles of depth ``k``; grouped GEMMs pass their rows per group."""
        return self.curve(precision).efficiency(k, rows_per_group)

    def multi_stream_share(self, flops_per_group: float) -> float:
        """The speed of a grouped GEMM run as one GEMM per group on several streams, as a share of one grouped
        kernel's, by its FLOPs per group (``multi_stream_factor``; 1 where the table has no measurement)."""
        return 1.0 if self.multi_stream is None else interpolate_log(self.multi_stream, flops_per_group)


def flat_gemm_table(efficiency: float) -> GemmEfficiencyTable:
    """One efficiency for every shape and precision (toy tests, what-ifs)."""
    flat = KernelCurve(((1.0, efficiency),))
    return GemmEfficiencyTable(flat, flat, flat, flat, "flat", flat)


def multi_stream_factor() -> Curve:
    """What Transformer Engine's multi-stream grouped GEMM (GroupedLinear's default path: one cuBLAS GEMM per
    group, round-robin over its compute streams, each with its own launch and last wave) runs at against a grouped
    CUTLASS kernel of the same shape, by FLOPs per group: each multi-stream point over the BF16 grouped point
    measured beside it (TransformerEngine PR #2045, TE 2.7, H100: 0.965 at 8 x 4,096 x 768 x 2,048, 12.9 GFLOP per
    group, 0.870 at 16 x 2,048 x 768 x 2,048, 6.4 GFLOP), flat beyond the two. Keyed by each GEMM's work, not its
    rows, so that the same path's weight gradients (groups split K; nvte_multi_tensor_gemm runs them alike) and
    input gradients of an expert, which do the forward's FLOPs per group, take the forward's share. Measured in
    BF16; FP8 GroupedLinear always takes this path (the CUTLASS one is BF16-only) and is priced with the same share
    of its own grouped curve (assumed: the per-GEMM launches and tails, not the dtype, make the difference)."""
    grouped = {(p.groups, p.m, p.n, p.k, p.source): p.tflops for p in points(GemmKernel.BF16_GROUPED)}
    shares = [
        (2.0 * p.m * p.n * p.k, p.tflops / grouped[(p.groups, p.m, p.n, p.k, p.source)])
        for p in points(GemmKernel.BF16_MULTI_STREAM)
    ]
    return tuple(sorted(shares))


def hopper_gemm_table() -> GemmEfficiencyTable:
    """The published-points table.

    BF16: cuBLAS dense points by K (below K = 2048 the FP8 shape at 2K, extend_down); grouped GEMMs by
    the CUTLASS grouped points' rows per group (torch._grouped_mm at 512 and 1040 rows, Transformer Engine's
    at 2048 and 4096). FP8 blockwise: DeepGEMM's dense and contiguous points by K, its masked points for rows
    per group. FP8 tensorwise (TE delayed / current scaling, cuBLAS): one published H100 SXM point, the MAMF
    finder's best per-tensor FP8 shape (1402.6 TFLOP/s), sets the level and DeepGEMM's blockwise curve the K
    dependence (assumed: per-tensor scales cost nothing in the main loop; the MAMF point runs 1.16x DeepGEMM's
    curve at its K); its rows factor comes from the FP8 rowwise grouped points (scales applied in the
    epilogue, as per-tensor ones), measured against that curve. MXFP8 runs on Blackwell only and no
    Hopper-comparable points exist: assumed = blockwise.
    """
    fp8 = _k_curve(GemmKernel.FP8_BLOCKWISE_DENSE)
    bf16 = extend_down(_k_curve(GemmKernel.BF16_DENSE), fp8, 2.0)
    tensorwise = _level_to(fp8, points(GemmKernel.FP8_TENSORWISE_DENSE))
    blockwise = KernelCurve(fp8, _rows_factor(points(GemmKernel.FP8_BLOCKWISE_MASKED), fp8))
    return GemmEfficiencyTable(
        bf16=KernelCurve(bf16, _rows_factor(points(GemmKernel.BF16_GROUPED), bf16)),
        fp8_tensorwise=KernelCurve(tensorwise, _rows_factor(points(GemmKernel.FP8_ROWWISE_GROUPED), tensorwise)),
        fp8_blockwise=blockwise,
        fp8_mxfp8=blockwise,
        source="simulator/costs/gemm_points.py: DeepGEMM a6d97a1; MAMF 744d01e (BF16, FP8); torch-performance-test-data "
        "#79; pytorch/ao #2490, #2756; TransformerEngine #2045",
        multi_stream=multi_stream_factor(),
    )


HOPPER_GEMM_TABLE = hopper_gemm_table()


def ampere_gemm_table() -> GemmEfficiencyTable:
    """Ampere (A100): Hopper's table with its BF16 curve at the level of the A100's one published point, the MAMF
    finder's best shape (gemm_points.A100_MAMF: 0.88 of the GA100's peak on a full wave, where Hopper's curve gives
    0.82 at its K, as the same table's H100 point, 0.80 of peak, sits below it); the K and rows-per-group dependence
    stay Hopper's (assumed: no per-shape A100 table is published). Until issue 40's stop 52 Ampere took Hopper's
    table as it is. The A100 has no FP8 tensor cores (its FP8 peak is its BF16 one, topologies.hardware a100)."""
    bf16 = replace(HOPPER_GEMM_TABLE.bf16, by_k=_level_to(HOPPER_GEMM_TABLE.bf16.by_k, (A100_MAMF,)))
    return replace(HOPPER_GEMM_TABLE, bf16=bf16, source=HOPPER_GEMM_TABLE.source + "; BF16 level: MAMF A100 SXM")


AMPERE_GEMM_TABLE = ampere_gemm_table()

# ---------------------------------------------------------------------------------------------------
# Attention. FlashAttention-3 paper (Shah et al. 2024, arXiv 2407.08608), Figs. 5 and 6, H100 80GB SXM5,
# BF16/FP16, batch x seqlen = 16k, hidden 2048; TFLOP/s as labelled on the bars (FLOPs counted the FA
# way: causal = half, backward = 2.5 x forward). FA3 and FA2 columns of the same figures. Sequence
# lengths 512 ... 16k. Values are the bar labels of those figures as transcribed by a third party (the
# paper's text gives only the peaks); a transcription error of a few TFLOP/s is possible.
ATTENTION_SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384)
# fmt: off
# (family, direction, causal, head_dim) -> TFLOP/s at ATTENTION_SEQ_LENS
ATTENTION_TFLOPS: dict[tuple[str, str, bool, int], tuple[float, ...]] = {
    ("fa3", "fwd", False, 64): (333, 392, 460, 476, 496, 497),
    ("fa3", "fwd", False, 128): (497, 565, 625, 638, 646, 648),  # 512: transcriptions swap 497 / 467 with cuDNN
    ("fa3", "fwd", False, 256): (482, 639, 707, 736, 746, 756),
    ("fa3", "fwd", True, 128): (292, 423, 521, 579, 602, 616),
    ("fa3", "fwd", True, 256): (286, 427, 537, 612, 628, 642),
    ("fa3", "bwd", False, 64): (272, 363, 422, 453, 472, 474),
    ("fa3", "bwd", False, 128): (316, 424, 501, 542, 559, 561),
    ("fa2", "fwd", False, 64): (282, 306, 318, 321, 322, 324),
    ("fa2", "fwd", False, 128): (309, 350, 362, 368, 370, 370),
    ("fa2", "fwd", False, 256): (275, 313, 321, 323, 324, 326),
    ("fa2", "fwd", True, 128): (191, 260, 298, 319, 333, 335),
    ("fa2", "fwd", True, 256): (208, 251, 278, 293, 297, 298),
    ("fa2", "bwd", False, 64): (198, 238, 264, 279, 287, 291),
    ("fa2", "bwd", False, 128): (214, 260, 291, 310, 318, 322),
}
# cuDNN's fused attention, what Transformer Engine runs on Hopper (workloads/inputs/megatron.py): the cuDNN bars of the
# same figures (cuDNN of mid-2024), from transcriptions whose FA3 and FA2 bars equal the rows above. No causal
# head-dim-64 or backward head-dim-256 row, as for FA3.
FA3_PAPER_CUDNN: dict[tuple[str, str, bool, int], tuple[float, ...]] = {
    ("cudnn", "fwd", False, 64): (335, 373, 395, 408, 412, 413),
    ("cudnn", "fwd", False, 128): (467, 574, 617, 609, 600, 595),  # 512: the other half of the swap above
    ("cudnn", "fwd", False, 256): (470, 546, 580, 581, 580, 581),
    ("cudnn", "fwd", True, 128): (315, 410, 484, 518, 529, 539),
    ("cudnn", "fwd", True, 256): (308, 391, 450, 483, 497, 509),
    ("cudnn", "bwd", False, 64): (266, 348, 395, 417, 432, 433),
    ("cudnn", "bwd", False, 128): (305, 408, 465, 499, 518, 516),
}
# fmt: on
# cuDNN 9.19 (backend 91901) on an H200, the release of the 2026 containers: NVIDIA/cudnn-frontend
# benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/llama3.1_20260227_034703.csv (batch 1, 64 query / 8 KV
# heads of 128, BF16, FLOPs counted as above; an H200 runs the H100's tensor cores at its clocks), head dim 128 at
# 2,048 to 16,384 tokens: 2-25% above the paper's bars, most at long sequences. (direction, causal) -> TFLOP/s.
CUDNN_919_SEQ_LENS = (2048, 4096, 8192, 16384)
CUDNN_919_H200: dict[tuple[str, bool], tuple[float, ...]] = {
    ("fwd", False): (633, 671, 691, 702),
    ("fwd", True): (484, 591, 644, 673),
    ("bwd", False): (504, 560, 594, 612),
}


def cudnn_rows() -> dict[tuple[str, str, bool, int], tuple[float, ...]]:
    """Hopper's cuDNN rows: the paper's bars at head dim 128 raised to cuDNN 9.19's measurement where it has one, and
    every other head dim's by the same ratio at each length and direction (assumed: the newer cuDNN gains alike at
    every head dim); below 2,048 tokens the paper's bars."""
    rows = {}
    for key, bars in FA3_PAPER_CUDNN.items():
        reference, measured = FA3_PAPER_CUDNN[key[:3] + (128,)], dict(zip(CUDNN_919_SEQ_LENS, CUDNN_919_H200[key[1:3]]))
        rows[key] = tuple(
            bar * measured[length] / ref if length in measured else bar
            for bar, ref, length in zip(bars, reference, ATTENTION_SEQ_LENS)
        )
    return rows


ATTENTION_TFLOPS.update(cudnn_rows())
ATTENTION_FAMILIES = ("fa3", "fa2", "cudnn")


def _attention_tflops(family: str, direction: str, causal: bool, head_dim: int, seq_len: int) -> float:
    """Published TFLOP/s at (head_dim, seq_len): log-interpolated over sequence length, then head dim."""
    dims = sorted(d for (f, di, c, d) in ATTENTION_TFLOPS if (f, di, c) == (family, direction, causal))
    if not dims:
        raise KeyError((family, direction, causal))
    by_dim = tuple(
        (
            float(d),
            interpolate_log(
                tuple(zip(map(float, ATTENTION_SEQ_LENS), ATTENTION_TFLOPS[(family, direction, causal, d)])), seq_len
            ),
        )
        for d in dims
    )
    return interpolate_log(by_dim, head_dim)


def attention_efficiency(family: str, backward: bool, causal: bool, head_dim: int, seq_len: int) -> float:
    """Fraction of the BF16 peak a FlashAttention kernel reaches on the FLOPs it executes.

    The FA3 paper publishes no causal backward: causal backward = non-causal backward x the forward's
    causal / non-causal ratio at the same shape (assumed: the mask costs both directions alike).
    """
    if family not in ATTENTION_FAMILIES:
        raise ValueError(f"attention kernel family must be one of {ATTENTION_FAMILIES}, got {family!r}")
    if not backward:
        tflops = _attention_tflops(family, "fwd", causal, head_dim, seq_len)
    else:
        tflops = _attention_tflops(family, "bwd", False, head_dim, seq_len)
        if causal:
            ratio = _attention_tflops(family, "fwd", True, head_dim, seq_len)
            tflops *= ratio / _attention_tflops(family, "fwd", False, head_dim, seq_len)
    return tflops * 1e12 / _HOPPER_PEAK_FLOPS[BF16]
