"""A schedule's lazy order and what is read from its prefix (held activations) against the walk over the full order."""

from itertools import islice

import pytest

from simulator.memory import held_chunks
from workloads.schedules import BACKWARD, FORWARD, DualPipe, DualPipeV, Interleaved, OneFOneB, Schedule, ZeroBubble1P

# (class, stages, chunks, ep_overlap, delay_wgrad, micro-batch counts): each class and option, small counts where
# the warm-up is cut short (1F1B at m < pp, interleaved at m = pp) up to counts far past the warm-up
SHAPES = [
    (OneFOneB, 4, 1, False, False, (1, 2, 3, 4, 5, 9, 40)),
    (OneFOneB, 1, 1, True, False, (1, 2, 3, 17)),
    (OneFOneB, 1, 1, True, True, (1, 2, 3, 17)),
    (ZeroBubble1P, 4, 1, False, False, (4, 5, 8, 33)),
    (Interleaved, 4, 2, False, False, (4, 8, 12, 40)),
    (Interleaved, 2, 3, False, False, (2, 4, 6, 30)),
    (Interleaved, 4, 2, True, False, (4, 8, 12, 40)),
    (Interleaved, 4, 2, True, True, (4, 8, 12, 40)),
    (DualPipe, 4, 1, False, False, (8, 10, 12, 40)),
    (DualPipe, 8, 1, False, False, (16, 18, 48)),
    (DualPipeV, 4, 2, False, False, (8, 9, 12, 40)),
]


def cases():
    for kind, stages, chunks, overlap, delay, counts in SHAPES:
        for m in counts:
            schedule = kind(stages, m, chunks, ep_overlap=overlap, delay_wgrad=delay)
            schedule.check()
            yield pytest.param(schedule, id=f"{kind.name}-pp{stages}-v{chunks}-ov{int(overlap)}{int(delay)}-m{m}")


def walked_chunks(schedule: Schedule, stage: int, count: int) -> tuple[int, ...]:
    """The chunks of the first ``count`` forward halves, from the whole order (what memory.py walked before)."""
    chunks = [c for task in schedule.order(stage) for phase, _, c in schedule.halves(task) if phase == FORWARD]
    return tuple(chunks[:count])


@pytest.mark.parametrize("schedule", list(cases()))
def test_forward_chunks_equal_the_walk_over_the_whole_order(schedule):
    for stage in range(schedule.stages):
        for count in (0, 1, schedule.in_flight(stage), schedule.in_flight(stage) + 3, 10**6):
            assert schedule.forward_chunks(stage, count) == walked_chunks(schedule, stage, count)
        assert held_chunks(schedule.shape, stage) == walked_chunks(schedule, stage, schedule.in_flight(stage))


@pytest.mark.parametrize("schedule", list(cases()))
def test_lazy_order_is_the_order(schedule):
    for stage in range(schedule.stages):
        assert list(schedule.lazy_order(stage)) == schedule.order(stage)


def drawn(schedule: Schedule, stage: int) -> int:
    """How many tasks of the lazy order ``forward_chunks`` draws for the in-flight forwards."""
    taken = 0
    lazy = schedule.lazy_order

    def counting(s: int):
        nonlocal taken
        for task in lazy(s):
            taken += 1
            yield task

    schedule.lazy_order = counting  # type: ignore[method-assign]
    schedule.forward_chunks(stage, schedule.in_flight(stage))
    return taken


@pytest.mark.parametrize(
    "kind, stages, chunks, overlap, m",
    [
        (OneFOneB, 4, 1, False, 8),
        (ZeroBubble1P, 4, 1, False, 8),
        (Interleaved, 4, 2, False, 8),
        (Interleaved, 4, 2, True, 8),
        (DualPipe, 4, 1, False, 8),
        (DualPipeV, 4, 2, False, 8),
    ],
)
def test_held_prefix_does_not_grow_with_micro_batches(kind, stages, chunks, overlap, m):
    """The prefix read for the held activations is as long at 64 m as at m (and shorter than the order)."""
    for stage in range(stages):
        small, large = (kind(stages, n, chunks, ep_overlap=overlap) for n in (m, 64 * m))
        assert drawn(small, stage) == drawn(large, stage) < len(large.order(stage))


def test_one_f_one_b_prefix_by_hand():
    """1F1B at pp 4, m 6, stage 1: warm-up F0 F1, then F2 B0 F3 ...: the 3 held forwards are the first 4 tasks."""
    schedule = OneFOneB(4, 6)
    assert [(t.direction, t.micro_batch) for t in islice(schedule.lazy_order(1), 4)] == [
        (FORWARD, 0),
        (FORWARD, 1),
        (FORWARD, 2),
        (BACKWARD, 0),
    ]
    assert drawn(schedule, 1) == 3  # in_flight(1) = pp - 1 = 3 forwards, the third right after the warm-up
    assert schedule.forward_chunks(1, 3) == (0, 0, 0)


def test_interleaved_prefix_by_hand():
    """Interleaved pp 2, v 2, stage 0: warm-up (2 - 0 - 1) 2 + (2 - 1) 2 = 4 forwards k = 0..3, chunks 0 0 1 1
    (micro-batches in groups of pp per chunk), and in_flight = 5 takes the first steady forward, k = 4: chunk 0."""
    schedule = Interleaved(2, 4, 2)
    assert schedule.in_flight(0) == 5
    assert schedule.forward_chunks(0, 5) == (0, 0, 1, 1, 0)
