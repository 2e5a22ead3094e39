"""ZB1P and DualPipeV (workloads.schedules.base): task orders replayed by hand with fixed durations, then the engine."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.toys import replay
from topologies.errors import ConfigError
from workloads.schedules.base import (
    BACKWARD,
    BACKWARD_INPUT,
    FORWARD,
    FORWARD_BACKWARD,
    FORWARD_BACKWARD_DELAYED,
    Schedule,
)
from workloads.schedules.dualpipe import DualPipe, DualPipeV
from workloads.schedules.one_f_one_b import Interleaved, OneFOneB, ZeroBubble1P
from workloads.schedules.pipeline_tasks import WEIGHT
from workloads.schedules.registry import bubble_dualpipe_s, bubble_zb1p_s


def positions(order) -> dict:
    """(FORWARD or BACKWARD or WEIGHT, micro-batch, chunk) -> index of the task that runs it."""
    where = {}
    for i, task in enumerate(order):
        for direction, mb, chunk in Schedule.halves(task):
            assert (direction, mb, chunk) not in where, "run twice"
            where[(direction, mb, chunk)] = i
        if task.direction == WEIGHT:
            where[(WEIGHT, task.micro_batch, task.chunk)] = i
    return where


UNIT = {FORWARD: 1.0, BACKWARD_INPUT: 1.0, WEIGHT: 1.0, BACKWARD: 2.0}  # F = Bi = W, B = Bi + W


# --- ZB1P -----------------------------------------------------------------------------------------


def test_zb1p_stage_orders_of_4() -> None:
    """PP 4, 6 micro-batches: 1F1B's warm-up, then stage s runs s (F, Bi) pairs before (F, Bi, W) triples, so its
    last s W passes fill the cool-down; stage 0 defers none."""
    name = {FORWARD: "F", BACKWARD_INPUT: "B", WEIGHT: "W"}
    got = [" ".join(f"{name[t.direction]}{t.micro_batch}" for t in ZeroBubble1P(4, 6).order(s)) for s in (0, 3)]
    assert got[0] == "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5"
    assert got[1] == "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5"


@pytest.mark.parametrize("stages,micro_batches", [(2, 2), (4, 4), (4, 8), (8, 8), (8, 24)])
def test_zb1p_each_task_once_in_order_and_bubble(stages: int, micro_batches: int) -> None:
    """Every micro-batch F, Bi, W once per stage in that order; with F = Bi = W = 1 (B = 2) every stage idles
    (PP - 1)(F + B - 2W) = PP - 1 (DualPipe README's ZB1P row), a third of 1F1B's (PP - 1)(F + B)."""
    schedule = ZeroBubble1P(stages, micro_batches)
    for stage in range(stages):
        where = positions(schedule.order(stage))
        for mb in range(micro_batches):
            assert where[(FORWARD, mb, 0)] < where[(BACKWARD, mb, 0)] < where[(WEIGHT, mb, 0)]
        assert len(where) == 3 * micro_batches
    idle = replay(schedule, UNIT)
    assert idle == [pytest.approx(bubble_zb1p_s(stages, 1, 2, 1), abs=1e-12)] * stages
    assert bubble_zb1p_s(stages, 1, 2, 1) == stages - 1


def test_zb1p_bubble_with_unequal_passes() -> None:
    """F = 2, Bi = 1, W = 1 (B = 2): (PP - 1)(2 + 2 - 2) = 2 (PP - 1) on the most idle stage."""
    idle = replay(ZeroBubble1P(4, 12), {FORWARD: 2.0, BACKWARD_INPUT: 1.0, WEIGHT: 1.0})
    assert max(idle) == pytest.approx(bubble_zb1p_s(4, 2, 2, 1))


def test_zb1p_holds_pp_activations() -> None:
    """Forwards minus W passes peak at PP on every stage (activations held until the weight gradient)."""
    schedule = ZeroBubble1P(4, 8)
    for stage in range(4):
        live = peak = 0
        for task in schedule.order(stage):
            live += {FORWARD: 1, WEIGHT: -1}.get(task.direction, 0)
            peak = max(peak, live)
        assert peak == schedule.in_flight(stage) == 4


# --- DualPipeV ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stages,micro_batches", [(2, 4), (2, 5), (3, 6), (4, 8), (4, 10), (8, 20)])
def test_dualpipev_deadlock_free_each_forward_before_its_backward(stages: int, micro_batches: int) -> None:
    """Every micro-batch's F and B once per chunk on every stage, F first, W after its Bi; no deadlock."""
    schedule = DualPipeV(stages, micro_batches)
    for stage in range(stages):
        order = schedule.order(stage)
        where = positions(order)
        for mb in range(micro_batches):
            for chunk in (0, 1):
                assert where[(FORWARD, mb, chunk)] < where[(BACKWARD, mb, chunk)]
        split = Counter((t.micro_batch, t.chunk) for t in order if t.direction == BACKWARD_INPUT)
        assert split == Counter((t.micro_batch, t.chunk) for t in order if t.direction == WEIGHT)
        assert sum(t.direction == FORWARD_BACKWARD for t in order) > 0
    replay(schedule, {**UNIT, FORWARD_BACKWARD: 3.0})


def test_dualpipev_is_dualpipe_cut_in_half() -> None:
    """Rank s of DualPipeV runs DualPipe's rank s of 2 PP ranks; the model in 2 PP blocks, one copy: stage s
    holds blocks s and 2 PP - 1 - s; the last stage's chunk 0 feeds its own chunk 1."""
    v = DualPipeV(4, 10)
    assert v.order(2) == DualPipe(8, 20).order(2)
    assert v.blocks == 8 and [v.stage_blocks(s) for s in range(4)] == [(0, 7), (1, 6), (2, 5), (3, 4)]
    assert v.successor(3, 0) == (3, 1) and v.predecessor(3, 1) == (3, 0) and v.successor(0, 1) is None


@pytest.mark.parametrize("stages", [2, 4, 8])
def test_dualpipev_bubble_readme_formula(stages: int) -> None:
    """F = Bi = W = 1, B = 2, F&B = 3: the most idle rank waits (PP/2 - 1)(F&B + B - 3W) with PP = 2 x ranks
    pipeline stages (deepseek-ai/DualPipe README, DualPipeV row), as DualPipe over 2 x ranks does."""
    idle = replay(DualPipeV(stages, 2 * stages + 2), {**UNIT, FORWARD_BACKWARD: 3.0})
    assert max(idle) == pytest.approx(bubble_dualpipe_s(2 * stages, 3.0, 2.0, 1.0), abs=1e-12)


def test_dualpipev_activations_pp_plus_one_half_chunks() -> None:
    """Forwards minus backwards (an F&B holds its forward while its backward runs) peak at 2 x ranks + 1
    blocks on stage 0 (README: PP + 1 of DualPipeV's half-size chunks)."""
    schedule = DualPipeV(4, 10)
    live = peak = 0
    for task in schedule.order(0):
        live += {FORWARD: 1, BACKWARD: -1, BACKWARD_INPUT: -1}.get(task.direction, 0)
        peak = max(peak, live + (task.direction == FORWARD_BACKWARD))
    assert peak == schedule.in_flight(0) == 9


# --- Megatron-Core EP overlap (combined 1F1B) -------------------------------------------------------


def test_ep_overlap_without_pipelining_pairs_each_forward_with_the_previous_backward() -> None:
    """PP 1 (Megatron-Core combined_1f1b_schedule_for_no_pipelining): F0, then F(i+1)&B(i), then the last B;
    with delay_wgrad the pairs' backward halves delay their weight gradients per layer (no W task)."""
    got = [(t.direction, t.micro_batch, t.paired) for t in OneFOneB(1, 3, ep_overlap=True).order(0)]
    assert got == [
        (FORWARD, 0, None),
        (FORWARD_BACKWARD, 1, (0, 0)),
        (FORWARD_BACKWARD, 2, (1, 0)),
        (BACKWARD, 2, None),
    ]
    delayed = [t.direction for t in OneFOneB(1, 3, ep_overlap=True, delay_wgrad=True).order(0)]
    assert delayed == [FORWARD, FORWARD_BACKWARD_DELAYED, FORWARD_BACKWARD_DELAYED, BACKWARD]


@pytest.mark.parametrize("delay_wgrad", [False, True])
@pytest.mark.parametrize("stages,micro_batches,chunks", [(2, 4, 2), (4, 8, 2), (4, 8, 3), (2, 2, 2)])
def test_ep_overlap_interleaved_runs_every_task_once(stages, micro_batches, chunks, delay_wgrad) -> None:
    """One more warm-up forward, then every steady-state F and B merged into one task of two different
    micro-batch chunks; each F and B once, F first; no deadlock; one more activation in flight."""
    schedule = Interleaved(stages, micro_batches, chunks, ep_overlap=True, delay_wgrad=delay_wgrad)
    plain = Interleaved(stages, micro_batches, chunks)
    for stage in range(stages):
        order = schedule.order(stage)
        where = positions(order)
        for mb in range(micro_batches):
            for chunk in range(chunks):
                assert where[(FORWARD, mb, chunk)] < where[(BACKWARD, mb, chunk)]
        assert all(t.paired != (t.micro_batch, t.chunk) for t in order if t.paired)
        assert schedule.in_flight(stage) == min(plain.in_flight(stage) + 1, micro_batches * chunks)
    durations = {**UNIT, FORWARD_BACKWARD: 2.5, FORWARD_BACKWARD_DELAYED: 2.5}
    replay(schedule, durations)


def test_ep_overlap_requirements() -> None:
    """Megatron-Core: with PP > 1 EP overlap needs virtual stages; delay_wgrad needs EP overlap."""
    with pytest.raises(ConfigError, match="layout.ep_overlap"):
        OneFOneB(2, 4, ep_overlap=True).check()
    with pytest.raises(ConfigError, match="layout.delay_wgrad"):
        Interleaved(2, 4, 2, delay_wgrad=True).check()
    Interleaved(2, 4, 2, ep_overlap=True, delay_wgrad=True).check()
