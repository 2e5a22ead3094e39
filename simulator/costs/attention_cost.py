"""FlashAttention per op: the FLOPs the kernel executes for an op's shape, and its efficiency on them.

The published efficiencies (simulator/costs/gemm_efficiency.py, the FlashAttention-3 paper's Figs. 5-6) count
FLOPs FlashAttention's way: s^2 pairs per sequence, half of them under the causal mask. A full causal op
is therefore timed on half its counted FLOPs at the causal table's efficiency, a non-causal one on all of
them at the non-causal table's. A sliding window is not in the figures: the kernel walks, for every block
of ``block`` queries, the key blocks that hold any key of its window (FA3's local mask skips the rest:
flash-attention hopper/block.h get_n_block_min_max) and computes each whole block, masking the few pairs
outside; so it executes those tiles' FLOPs, about 2 w / s of the non-causal count at w = block (twice the
pairs it keeps). Its efficiency is assumed to be that of a non-causal sequence as long as the keys a query
block walks (key blocks x block): the same loop over the same number of key tiles per CTA (mask cost on
the boundary tiles not charged separately).
"""

from __future__ import annotations

import math
from functools import lru_cache

from simulator.costs.attention_shapes import MeasuredShape, measured_shape
from simulator.costs.calibration import Calibration
from simulator.costs.gemm_efficiency import ATTENTION_SEQ_LENS, interpolate_log
from simulator.costs.generations import AttentionTable, kernel_tables
from topologies.errors import ConfigError
from topologies.hardware import GPU_PRESETS, GpuGeneration
from workloads.graph.op_lists import ATTENTION_BACKWARD_FACTOR
from workloads.ops import AttentionShape, attention_flops, attention_pairs


def window_key_blocks(seq_len: int, window: int, block: int) -> int:
    """Key blocks of ``block`` keys that the query blocks of a causal window of ``window`` keys walk, summed:
    query block i (rows i B .. i B + B - 1) needs keys max(0, i B - w + 1) .. i B + B - 1."""
    total = 0
    for i in range(math.ceil(seq_len / block)):
        first = max(0, i * block - window + 1) // block
        total += i - first + 1
    return total


def executed_fraction(shape: AttentionShape, cal: Calibration) -> float:
    """Executed over counted FLOPs (``attention_pairs``): the causal fraction of a full causal op, 1 without
    a mask, the whole key tiles a sliding window walks over its counted pairs."""
    if shape.sliding:
        block = cal.attention_block_tokens
        executed = window_key_blocks(shape.seq_len, shape.window, block) * block * block
        return executed / attention_pairs(shape.seq_len, shape.window)
    return cal.attention_causal_fraction if shape.causal else 1.0


def effective_seq_len(shape: AttentionShape, cal: Calibration) -> float:
    """The non-causal sequence length whose per-query-block loop matches a sliding window's: key blocks
    walked per query block x block (assumed); the op's own length otherwise."""
    if not shape.sliding:
        return float(shape.seq_len)
    block = cal.attention_block_tokens
    query_blocks = math.ceil(shape.seq_len / block)
    return window_key_blocks(shape.seq_len, shape.window, block) / query_blocks * block


def _table_efficiency(
    table: AttentionTable, family: str, backward: bool, causal: bool, head_dim: float, seq_len: float
) -> float:
    """The table's efficiency, extended below its shortest length (512): the published 512 and 1,024 points
    fitted as a fixed cost per CTA beside a loop linear in the keys, 1 / eff = a + b / s (the table is flat
    beyond its ends, which would overstate a 256-key window). Above 512 the table itself."""
    shortest, next_len = ATTENTION_SEQ_LENS[0], ATTENTION_SEQ_LENS[1]
    if seq_len >= shortest:
        return table(family, backward, causal, head_dim, seq_len)
    inv_short = 1.0 / table(family, backward, causal, head_dim, shortest)
    inv_next = 1.0 / table(family, backward, causal, head_dim, next_len)
    slope = (inv_short - inv_next) / (1.0 / shortest - 1.0 / next_len)
    return 1.0 / (inv_next + slope * (1.0 / seq_len - 1.0 / next_len))


def attention_op_efficiency(
    shape: AttentionShape, backward: bool, cal: Calibration, generation: GpuGeneration = GpuGeneration.HOPPER
) -> float:
    """Fraction of the BF16 peak the op's kernel family (the layout's attention_backend, else the calibration's)
    reaches on the op's executed FLOPs, in the attention table of the GPU's generation (simulator.costs.generations).

    Looked up at the head width with the op's FLOPs per query-key pair, (d_qk + d_v) / 2: the head dim
    itself for GQA / MHA; for MLA (192 / 128) 160, log-interpolated between the published 128 and 256
    (assumed: FA3 ships a 192 / 128 kernel the paper's figures do not measure). A sliding window at its
    effective non-causal length (module docstring); full attention at its own length and mask. A causal shape that
    cuDNN's benchmark timed itself (MLA, GPT-OSS's window: simulator/costs/attention_shapes.py) is then corrected to
    the measurement (``measured_ratio``). With dropout the kernel takes its generation's measured dropout time longer.
    """
    fixed = cal.attention_bwd_efficiency if backward else cal.attention_fwd_efficiency
    if fixed is not None:
        return fixed
    family = shape.kernel or cal.attention_kernel
    if family == "cudnn-fp8" and generation not in (GpuGeneration.BLACKWELL, GpuGeneration.BLACKWELL_ULTRA):
        raise ConfigError(
            "layout.attention_backend",
            f"cudnn-fp8 (FP8 attention) is timed from Blackwell measurements only; none published for {generation.value}",
        )
    efficiency = _looked_up(shape, backward, cal, generation, family)
    if shape.dropout:  # the kernel's dropout (simulator/costs/generations.py HOPPER_ATTENTION_DROPOUT_TIME)
        efficiency /= kernel_tables(generation).attention_dropout_time
    window = shape.window if shape.sliding else 0
    measured = measured_shape(family, shape.head_dim, shape.head_dim_v, window, generation) if shape.causal else None
    if measured is None:
        return efficiency
    return efficiency * measured_ratio(measured, backward, cal, float(shape.seq_len))


def _looked_up(
    shape: AttentionShape, backward: bool, cal: Calibration, generation: GpuGeneration, family: str
) -> float:
    """The generation's attention table at the op's head width, mask and (effective) sequence length."""
    head_dim = (shape.head_dim + shape.head_dim_v) / 2
    causal = shape.causal and not shape.sliding
    table = kernel_tables(generation).attention
    return _table_efficiency(table, family, backward, causal, head_dim, effective_seq_len(shape, cal))


@lru_cache(maxsize=256)
def _ratios(measured: MeasuredShape, backward: bool, cal: Calibration) -> tuple[tuple[float, float], ...]:
    """(sequence length, measured efficiency / looked-up efficiency) at each length the benchmark timed: the measured
    time turned into an efficiency on the FLOPs the op executes (moesim's count: ``attention_pairs``, the backward at
    ATTENTION_BACKWARD_FACTOR, the executed fraction of its mask or window), on the measuring GPU's BF16 peak."""
    times_ms = measured.backward_ms if backward else measured.forward_ms
    factor = ATTENTION_BACKWARD_FACTOR if backward else 1.0
    peak = GPU_PRESETS[measured.gpu].peak_bf16_flops
    generation = GPU_PRESETS[measured.gpu].generation
    points = []
    for seq_len, time_ms in zip(measured.seq_lens, times_ms):
        shape = AttentionShape(measured.head_dim, measured.head_dim_v, seq_len, True, measured.window, measured.family)
        pairs = attention_pairs(seq_len, measured.window)
        counted = (
            attention_flops(measured.batch, pairs, measured.heads, measured.head_dim, measured.head_dim_v) * factor
        )
        efficiency = counted * executed_fraction(shape, cal) / (time_ms * 1e-3 * peak)
        points.append((float(seq_len), efficiency / _looked_up(shape, backward, cal, generation, measured.family)))
    return tuple(points)


def measured_ratio(measured: MeasuredShape, backward: bool, cal: Calibration, seq_len: float) -> float:
    """What the looked-up efficiency of a directly measured shape is multiplied by at ``seq_len``: the measured over
    looked-up ratio, log-interpolated between the measured lengths and held beyond them
    (simulator/costs/attention_shapes.py)."""
    return interpolate_log(_ratios(measured, backward, cal), seq_len)
