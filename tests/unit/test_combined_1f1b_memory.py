"""Activations held under EP overlap (Megatron-Core's combined 1F1B): a forward and a backward of two micro-batches
issued layer by layer, forward layer i beside backward layer n_b - 1 - i (TransformerModelChunkSchedulePlan.run at
NVIDIA/Megatron-LM d98e8a64dd), hold one block plus one layer of the two, not two whole blocks."""

from __future__ import annotations

import pytest

from simulator.memory.per_gpu import (
    block_activation_bytes,
    held_chunks,
    held_pair,
    in_flight_activation_bytes,
    pair_peak_bytes,
)
from workloads.graph.step import StepWorkload
from workloads.schedules.registry import make_schedule
from workloads.specs.layouts import MEGATRON_LM
from workloads.specs.models import MODEL_PRESETS

MODEL = MODEL_PRESETS["mixtral-8x7b"]  # 32 layers, all MoE: every layer keeps the same bytes
EP = MEGATRON_LM.with_(ffn="ep", intra_size=1, ep=8, recompute="none", dropless=True, sequence_parallel=False, pp=1)


def workload(**changes: object) -> StepWorkload:
    return StepWorkload(MODEL, EP.with_(**changes), 64, 8, 512, 4096)


def test_pair_peak_by_hand() -> None:
    # equal blocks of 4 layers of 1 byte: phase i holds forward 0..i and backward 0..3-i, 5 bytes each phase
    assert pair_peak_bytes([1.0] * 4, [1.0] * 4) == 5.0
    # forward [1, 2], backward [3, 1, 1]: phase 0 1 + 5, phase 1 3 + 4, phase 2 (backward alone) 3 + 3: 7
    assert pair_peak_bytes([1.0, 2.0], [3.0, 1.0, 1.0]) == 7.0
    # a longer forward: its last layers run after the backward is done, the forward block whole at the end
    assert pair_peak_bytes([1.0, 1.0, 1.0], [2.0]) == 3.0
    assert pair_peak_bytes([], []) == 0.0


def test_pp1_overlap_holds_one_micro_batch_and_one_layer() -> None:
    """PP 1: the first micro-batch's forward runs alone, then each F&B pairs the next forward with its backward
    (combined_1f1b_schedule_for_no_pipelining): L + 1 layers at the peak, where 2 L were counted before."""
    plain, overlap = workload(), workload(ep_overlap=True)
    layers = MODEL.num_layers
    block = block_activation_bytes(plain, range(layers))
    assert in_flight_activation_bytes(plain, 0) == pytest.approx(block)
    assert held_chunks(overlap.schedule.shape, 0) == (0, 0)  # two forwards counted: the warm-up one and the F&B's
    assert held_pair(overlap.schedule.shape, 0) == (0, 0)
    assert in_flight_activation_bytes(overlap, 0) == pytest.approx(block * (layers + 1) / layers, rel=1e-12)


def test_interleaved_overlap_frees_the_paired_backward_layer_by_layer() -> None:
    """Interleaved 1F1B, PP 4, VP 2, EP overlap: stage 0 holds its warm-up forwards ((4 - 1) 2 + (2 - 1) 4 = 10, one
    more for the F&B pairing) and the F&B's forward; of the F&B's two blocks (4 layers each) one block and one layer."""
    overlap = workload(pp=4, schedule="interleaved", virtual_stages=2, ep_overlap=True)
    chunks = held_chunks(overlap.schedule.shape, 0)
    assert len(chunks) == 12
    forward_chunk, backward_chunk = held_pair(overlap.schedule.shape, 0)
    assert (forward_chunk, backward_chunk) == (chunks[-1], 1)  # the first backward runs the last chunk
    block = block_activation_bytes(overlap, overlap.block_ranges[0])
    assert len(overlap.block_ranges[0]) == 4
    assert in_flight_activation_bytes(overlap, 0) == pytest.approx((12 - 2) * block + block * 5 / 4, rel=1e-12)
    # without overlap nothing is paired: every held forward counts whole
    plain = workload(pp=4, schedule="interleaved", virtual_stages=2)
    assert held_pair(plain.schedule.shape, 0) is None
    assert in_flight_activation_bytes(plain, 0) == pytest.approx(len(held_chunks(plain.schedule.shape, 0)) * block)


@pytest.mark.parametrize("name", ["dualpipe", "dualpipev"])
@pytest.mark.parametrize("pp", [2, 4, 8, 16])
def test_dualpipe_keeps_its_pp_plus_one_chunks(name: str, pp: int) -> None:
    """DualPipe(V) holds PP + 1 chunks (deepseek-ai/DualPipe README), all forwards of its own before its F&B pairs:
    nothing is paired at its peak, with or without EP overlap."""
    schedule = make_schedule(name, pp, 64, 1, ep_overlap=True)
    assert all(held_pair(schedule.shape, stage) is None for stage in range(pp))
