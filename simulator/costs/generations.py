"""The kernel tables of each GPU generation: which published measurements time a GPU's GEMMs and attention.

A registry keyed by the GPU spec's typed ``generation`` (topologies.hardware.GpuGeneration): adding a generation
adds one entry here. Hopper's tables are its own measurements (simulator.costs.gemm_efficiency); Blackwell's and
Blackwell Ultra's are Blackwell's (simulator.costs.blackwell_tables); Ampere has none published per shape and uses
Hopper's, its BF16 GEMMs at the A100's one published level (gemm_efficiency.ampere_gemm_table) and its attention at
Hopper's fractions (assumed). A calibration that fixes a GEMM table (Calibration.gemm_efficiency: toy tests,
what-ifs) overrides the generation's.

No Blackwell run is in the validation corpus (``moesim validate``): on a Blackwell GPU a prediction rests on these
kernel tables alone, and ``moesim run`` says so (experiments/common/error_band.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulator.costs.blackwell_tables import (
    BLACKWELL_ATTENTION_SOURCE,
    BLACKWELL_GEMM_TABLE,
    BLACKWELL_ULTRA_ATTENTION_SOURCE,
    blackwell_attention_efficiency,
    blackwell_ultra_attention_efficiency,
    mamf_level,
)
from simulator.costs.calibration import Calibration
from simulator.costs.gemm_efficiency import (
    AMPERE_GEMM_TABLE,
    HOPPER_GEMM_TABLE,
    GemmEfficiencyTable,
    attention_efficiency,
)
from simulator.costs.gemm_points import GemmKernel
from simulator.costs.hbm_fraction import BLACKWELL_HBM_FRACTION, BLACKWELL_ULTRA_HBM_FRACTION
from topologies.hardware import GpuGeneration, GpuSpec
from workloads.ops import GemmPrecision

# (family, backward, causal, head dim, per-sequence length) -> fraction of the GPU's BF16 peak
AttentionTable = Callable[[str, bool, bool, float, float], float]


@dataclass(frozen=True)
class KernelTables:
    """One generation's published kernel tables."""

    gemm: GemmEfficiencyTable
    attention: AttentionTable
    attention_source: str
    # the fraction of its HBM bandwidth its memory-bound kernels reach, relative to Hopper's
    # (Calibration.memory_efficiency's anchor; simulator/costs/hbm_fraction.py)
    hbm_fraction: float = 1.0
    # an attention kernel's time with dropout over its time without (simulator/costs/attention_cost.py)
    attention_dropout_time: float = 1.0


# Attention dropout inside cuDNN's fused attention, which Transformer Engine runs under Megatron's [s, b, h, d] layout:
# DotProductAttention forward and backward, BF16, 4 x 4,096 tokens, 16 heads of 128, p 0.0 against 0.1, median of 50
# (NVIDIA/TransformerEngine issue #3312, 2026-08-04): H200 (TE 2.15) 0.594 -> 0.614 ms, B300 (TE 2.14.1) 0.480 -> 0.525
# ms. The packed (thd) layout pays far more (1.26x on H200, 5.24x on B300: cuDNN's composite engine), not modelled:
# Megatron-Core runs it for packed sequences (PackedSeqParams), whose attention moesim does not time. Taken for every
# p > 0 (the random numbers cost the same whatever p) and both directions alike (assumed: only their sum was timed);
# the B300's for Blackwell too (assumed: no SM100 sbhd timing found).
HOPPER_ATTENTION_DROPOUT_TIME = 0.614 / 0.594
BLACKWELL_ATTENTION_DROPOUT_TIME = 0.525 / 0.480


_HOPPER = KernelTables(
    HOPPER_GEMM_TABLE,
    attention_efficiency,
    "FlashAttention-3 paper (arXiv 2407.08608) Figs. 5-6",
    attention_dropout_time=HOPPER_ATTENTION_DROPOUT_TIME,
)
KERNEL_TABLES: dict[GpuGeneration, KernelTables] = {
    # the A100: Hopper's BF16 curve at its MAMF point's level; Hopper's attention fractions, assumed
    GpuGeneration.AMPERE: KernelTables(
        AMPERE_GEMM_TABLE,
        attention_efficiency,
        _HOPPER.attention_source,
        attention_dropout_time=HOPPER_ATTENTION_DROPOUT_TIME,
    ),
    GpuGeneration.HOPPER: _HOPPER,
    GpuGeneration.BLACKWELL: KernelTables(
        BLACKWELL_GEMM_TABLE,
        blackwell_attention_efficiency,
        BLACKWELL_ATTENTION_SOURCE,
        BLACKWELL_HBM_FRACTION,
        BLACKWELL_ATTENTION_DROPOUT_TIME,
    ),
    # Blackwell Ultra: Blackwell's GEMM table (B300's own points are in it), its attention from cuDNN's GB300 run
    GpuGeneration.BLACKWELL_ULTRA: KernelTables(
        BLACKWELL_GEMM_TABLE,
        blackwell_ultra_attention_efficiency,
        BLACKWELL_ULTRA_ATTENTION_SOURCE,
        BLACKWELL_ULTRA_HBM_FRACTION,
        BLACKWELL_ATTENTION_DROPOUT_TIME,
    ),
}


# Generations whose FP8 GEMMs take every layout, not only TN: where TE quantizes per tensor it then makes no
# transpose for the column-wise usage (the wgrad GEMM reads the row-wise FP8 with the transpose flag flipped).
# NVIDIA/TransformerEngine@d0067d0d transformer_engine/common/transformer_engine.cpp
# nvte_is_non_tn_fp8_gemm_supported: compute capability 10.x-11.x or >= 13.0 (SM100 B200 / GB200, SM103 B300 /
# GB300), not SM90 (Hopper), SM80 (no FP8 GEMM) or SM120; pytorch/csrc/quantizer.cpp Float8Quantizer and
# Float8CurrentScalingQuantizer::create_tensor (``with_transpose = columnwise_usage && !is_non_tn...``).
NON_TN_FP8_GEMM: frozenset[GpuGeneration] = frozenset({GpuGeneration.BLACKWELL, GpuGeneration.BLACKWELL_ULTRA})


def runs_non_tn_fp8_gemm(generation: GpuGeneration) -> bool:
    """Whether ``generation``'s FP8 GEMMs take every layout, so a per-tensor FP8 quantization writes no transpose."""
    return generation in NON_TN_FP8_GEMM


def kernel_tables(generation: GpuGeneration) -> KernelTables:
    """The tables of ``generation``."""
    return KERNEL_TABLES[generation]


def gemm_table(gpu: GpuSpec, cal: Calibration) -> GemmEfficiencyTable:
    """The GEMM table that times ``gpu``'s GEMMs: the calibration's where it fixes one, else the generation's."""
    return cal.gemm_efficiency if cal.gemm_efficiency is not None else KERNEL_TABLES[gpu.generation].gemm


# The MAMF family whose measured per-GPU level scales a precision's curve: FP8's for every 8- and 4-bit recipe, whose
# Blackwell curves are the FP8 per-tensor curve at TE's measured ratios (simulator/costs/blackwell_tables.py)
_MAMF_FAMILY = {GemmPrecision.BF16: GemmKernel.BF16_DENSE}


def gemm_level(gpu: GpuSpec, precision: GemmPrecision, cal: Calibration) -> float:
    """What multiplies the generation's GEMM table for ``gpu``: its own measured level where it has one (Blackwell,
    blackwell_tables.mamf_level), else 1 (and 1 under a calibration that fixes the table)."""
    blackwell = gpu.generation in (GpuGeneration.BLACKWELL, GpuGeneration.BLACKWELL_ULTRA)
    if cal.gemm_efficiency is not None or not blackwell:
        return 1.0
    return mamf_level(gpu.name, _MAMF_FAMILY.get(precision, GemmKernel.FP8_TENSORWISE_DENSE))


def memory_bandwidth_Bps(gpu: GpuSpec, cal: Calibration) -> float:
    """The HBM bandwidth ``gpu``'s memory-bound kernels reach: the calibration's fraction (Hopper's) of its peak, times
    its generation's fraction relative to Hopper's."""
    return gpu.hbm_bandwidth_Bps * cal.memory_efficiency * KERNEL_TABLES[gpu.generation].hbm_fraction
