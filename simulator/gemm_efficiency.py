"""Kernel efficiencies by shape, as DATA (published points) plus the interpolation that reads them.

GEMMs: the fraction of the tensor-core peak one SM reaches on a full wave of 128 x 128 tiles, as a
function of the reduction depth K (the per-tile prologue / epilogue is amortized over K), per dtype;
grouped GEMMs also by rows per group (each group's weights are streamed for few rows). Attention:
FlashAttention-3 (default) or FlashAttention-2 by head dim, sequence length, causal mask, direction.

Every point below is a published measurement on Hopper (H800 / H100 SXM, 132 SMs). Other GPU families
use the same table (assumed = Hopper's: no comparable per-shape tables are published for them).
Sustained clocks under the power cap are not modelled separately: they are folded into these measured
efficiencies (no published sustained-clock number for the H800 was found).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

BF16 = "bf16"
FP8 = "fp8"

# Peaks and SM count of the GPUs the points were measured on (H800 / H100 SXM, NVIDIA datasheets).
_HOPPER_PEAK_FLOPS = {BF16: 989e12, FP8: 1979e12}
_HOPPER_SMS = 132
_TILE = 128  # CUTLASS / cuBLAS / DeepGEMM Hopper tile edge used to divide out wave quantization

# fmt: off
# (dtype, groups, rows per group (M), N, K, measured TFLOP/s, source)
GEMM_POINTS: tuple[tuple[str, int, int, int, int, float, str], ...] = (
    # DeepGEMM README, H800 SXM5, FP8 1x128 / 128x128 block scaling, "Normal GEMMs for dense models",
    # M = 4096 rows (deepseek-ai/DeepGEMM commit a6d97a1, the initial release)
    (FP8, 1, 4096, 24576, 1536, 990.0, "DeepGEMM README a6d97a1, dense"),
    (FP8, 1, 4096, 32768, 512, 590.0, "DeepGEMM README a6d97a1, dense"),
    (FP8, 1, 4096, 7168, 16384, 1358.0, "DeepGEMM README a6d97a1, dense"),
    (FP8, 1, 4096, 4096, 7168, 1304.0, "DeepGEMM README a6d97a1, dense"),
    (FP8, 1, 4096, 2112, 7168, 1058.0, "DeepGEMM README a6d97a1, dense"),
    (FP8, 1, 4096, 7168, 2048, 1025.0, "DeepGEMM README a6d97a1, dense"),
    # same README, "Grouped GEMMs for MoE models (contiguous layout)"
    (FP8, 4, 8192, 4096, 7168, 1297.0, "DeepGEMM README a6d97a1, grouped contiguous"),
    (FP8, 4, 8192, 7168, 2048, 1099.0, "DeepGEMM README a6d97a1, grouped contiguous"),
    (FP8, 8, 4096, 4096, 7168, 1288.0, "DeepGEMM README a6d97a1, grouped contiguous"),
    (FP8, 8, 4096, 7168, 2048, 1093.0, "DeepGEMM README a6d97a1, grouped contiguous"),
    # BF16: MAMF finder, H100 SXM (700 W, the H800's power class), best shape 2048 x 2048 x 13312,
    # 794.5 TFLOP/s (stas00/ml-engineering compute/accelerator/README.md, commit 744d01e).
    (BF16, 1, 2048, 2048, 13312, 794.5, "ml-engineering MAMF H100 SXM 744d01e"),
)
# Grouped GEMMs with few rows per group (DeepGEMM README a6d97a1, "masked layout", H800, FP8):
# (groups, rows per group, N, K, TFLOP/s). Their efficiency relative to the large-row curve at the same
# K is the rows-per-group factor.
GROUPED_ROWS_POINTS: tuple[tuple[int, int, int, int, float], ...] = (
    (1, 1024, 4096, 7168, 1233.0), (1, 1024, 7168, 2048, 925.0),
    (2, 512, 4096, 7168, 1040.0), (2, 512, 7168, 2048, 916.0),
    (4, 256, 4096, 7168, 932.0), (4, 256, 7168, 2048, 815.0),
)
# fmt: on


def wave_fraction(m: int, n: int, groups: int = 1, sms: int = _HOPPER_SMS, tile: int = _TILE) -> float:
    """Useful output share of the waves a (grouped) GEMM occupies: m n groups / (waves x SMs x tile^2)."""
    tiles = math.ceil(m / tile) * math.ceil(n / tile) * groups
    return m * n * groups / (math.ceil(tiles / sms) * sms * tile * tile)


def _tile_efficiency(dtype: str, groups: int, m: int, n: int, k: int, tflops: float) -> float:
    """A measured point as a full-wave tile efficiency: TFLOP/s / peak / wave fraction."""
    return tflops * 1e12 / _HOPPER_PEAK_FLOPS[dtype] / wave_fraction(m, n, groups)


def interpolate_log(points: tuple[tuple[float, float], ...], x: float) -> float:
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


def _mean_by_k(rows: list[tuple[int, float]]) -> tuple[tuple[float, float], ...]:
    by_k: dict[int, list[float]] = {}
    for k, eff in rows:
        by_k.setdefault(k, []).append(eff)
    return tuple((float(k), sum(v) / len(v)) for k, v in sorted(by_k.items()))


def _fp8_curve() -> tuple[tuple[float, float], ...]:
    """FP8 tile efficiency by K: the DeepGEMM points, waves divided out, averaged at equal K."""
    return _mean_by_k(
        [(p[4], _tile_efficiency(p[0], p[1], p[2], p[3], p[4], p[5])) for p in GEMM_POINTS if p[0] == FP8]
    )


def _bf16_curve(fp8: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
    """BF16 tile efficiency by K, anchored on the MAMF point.

    No published BF16 sweep over K was found, so the K dependence is borrowed from FP8 (assumed): the
    per-tile fixed cost (pipeline fill, epilogue of 128 x 128 BF16 outputs) takes the same time in both
    dtypes while the BF16 main loop runs at half the FP8 rate, so a BF16 tile of depth K looks like an FP8
    tile of depth 2K. eff_bf16(K) = eff_mamf x fp8(2K) / fp8(2 K_mamf), sampled at the FP8 points' K / 2.
    """
    (dtype, groups, m, n, k, tflops, _source) = next(p for p in GEMM_POINTS if p[0] == BF16)
    anchor = _tile_efficiency(dtype, groups, m, n, k, tflops)
    scale = anchor / interpolate_log(fp8, 2 * k)
    ks = sorted({x / 2 for x, _ in fp8} | {float(k)})
    return tuple((kk, min(interpolate_log(fp8, 2 * kk) * scale, 1.0)) for kk in ks)


def _rows_factor(fp8: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
    """Rows-per-group factor: masked-layout points over the large-row FP8 curve at their K, averaged."""
    rows: dict[int, list[float]] = {}
    for groups, m, n, k, tflops in GROUPED_ROWS_POINTS:
        rows.setdefault(m, []).append(_tile_efficiency(FP8, groups, m, n, k, tflops) / interpolate_log(fp8, k))
    factors = [(float(m), min(sum(v) / len(v), 1.0)) for m, v in sorted(rows.items())]
    return (*factors, (4096.0, 1.0))  # the contiguous-layout points (4096+ rows per group) define the curve


@dataclass(frozen=True)
class GemmEfficiencyTable:
    """Full-wave tile efficiency by dtype and K, and the grouped rows-per-group factor."""

    bf16_by_k: tuple[tuple[float, float], ...]
    fp8_by_k: tuple[tuple[float, float], ...]
    grouped_rows_factor: tuple[tuple[float, float], ...] = ((1.0, 1.0),)
    source: str = ""

    def tile_efficiency(self, k: int, fp8: bool, rows_per_group: int | None = None) -> float:
        """Efficiency of a full wave of tiles of depth ``k``; grouped GEMMs pass their rows per group."""
        eff = interpolate_log(self.fp8_by_k if fp8 else self.bf16_by_k, k)
        if rows_per_group is not None:
            eff *= interpolate_log(self.grouped_rows_factor, rows_per_group)
        return eff


def flat_gemm_table(efficiency: float) -> GemmEfficiencyTable:
    """One efficiency for every shape and dtype (toy tests, what-ifs)."""
    return GemmEfficiencyTable(((1.0, efficiency),), ((1.0, efficiency),), ((1.0, 1.0),), "flat")


def hopper_gemm_table() -> GemmEfficiencyTable:
    """The published-points table (DeepGEMM FP8, MAMF BF16)."""
    fp8 = _fp8_curve()
    return GemmEfficiencyTable(_bf16_curve(fp8), fp8, _rows_factor(fp8), "DeepGEMM README a6d97a1; MAMF 744d01e")


HOPPER_GEMM_TABLE = hopper_gemm_table()

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
# fmt: on
ATTENTION_FAMILIES = ("fa3", "fa2")


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
