"""What is read from a schedule's order without walking all of it (the held activations from its prefix, the task
counts from an order with steady periods cut) against the walk over the whole order."""

from itertools import islice

import pytest

from simulator.fast.periodic import index_step, task_counts
from simulator.memory.per_gpu import held_chunks
from simulator.report.bounds import shape_task_counts
from topologies.errors import ConfigError
from workloads.schedules.base import Phase, Schedule, Task, shape_order
from workloads.schedules.dualpipe import DualPipe, DualPipeV
from workloads.schedules.one_f_one_b import Interleaved, OneFOneB, ZeroBubble1P
from workloads.schedules.pipeline_tasks import kind_of

FORWARD, BACKWARD, BACKWARD_INPUT, WEIGHT = Phase.FORWARD, Phase.BACKWARD, Phase.BACKWARD_INPUT, Phase.WEIGHT

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
# (stages, chunks, group, micro-batch counts): the interleaved schedule in groups of N micro-batches
# (--microbatch-group-size-per-virtual-pipeline-stage), the last group whole (m mod N = 0) or holding the rest (>= pp)
GROUPED = [(2, 2, 3, (3, 5, 6, 8, 11, 29)), (4, 2, 6, (6, 10, 12, 16, 40)), (2, 3, 4, (4, 6, 7, 22))]

# (class, stages, chunks, ep_overlap, m): shapes whose cost is compared at m and 64 m
GROWING = [
    (OneFOneB, 4, 1, False, 12),
    (OneFOneB, 4, 1, True, 12),
    (ZeroBubble1P, 4, 1, False, 12),
    (Interleaved, 4, 2, False, 12),
    (Interleaved, 4, 2, True, 12),
    (DualPipe, 4, 1, False, 12),
    (DualPipeV, 4, 2, False, 12),
]


def cases():
    for kind, stages, chunks, overlap, delay, counts in SHAPES:
        for m in counts:
            schedule = kind(stages, m, chunks, ep_overlap=overlap, delay_wgrad=delay)
            schedule.check()
            yield pytest.param(schedule, id=f"{kind.name}-pp{stages}-v{chunks}-ov{int(overlap)}{int(delay)}-m{m}")
    for stages, chunks, group, counts in GROUPED:
        for m in counts:
            schedule = Interleaved(stages, m, chunks, group=group)
            schedule.check()
            yield pytest.param(schedule, id=f"interleaved-pp{stages}-v{chunks}-group{group}-m{m}")


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


def tasks_drawn(owner: type[Schedule], action) -> int:
    """How many tasks ``action()`` draws from the lazy orders of ``owner``'s schedules (DualPipeV's are DualPipe's)."""
    taken = 0
    lazy = owner.lazy_order

    def counting(self, stage: int):
        nonlocal taken
        for task in lazy(self, stage):
            taken += 1
            yield task

    owner.lazy_order = counting  # type: ignore[method-assign]
    try:
        action()
    finally:
        owner.lazy_order = lazy  # type: ignore[method-assign]
    return taken


def drawn(schedule: Schedule, stage: int) -> int:
    """How many tasks of the lazy order ``forward_chunks`` draws for the in-flight forwards."""
    owner = DualPipe if isinstance(schedule, DualPipeV) else type(schedule)
    return tasks_drawn(owner, lambda: schedule.forward_chunks(stage, schedule.in_flight(stage)))


@pytest.mark.parametrize("kind, stages, chunks, overlap, m", GROWING)
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


def test_interleaved_groups_by_hand():
    """Megatron-Core's get_schedule_table at pp 2, v 2, groups of 3 over 5 micro-batches: the whole group 0-2 through
    chunk 0 then chunk 1, then the rest 3-4 likewise; stage 0 warms up (2 - 0 - 1) 2 + (2 - 1) 3 = 5 forwards, pairs
    each next forward with the backwards in the same table order, chunks reversed, and drains the last five."""
    schedule = Interleaved(2, 5, 2, group=3)
    forwards = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (3, 0), (4, 0), (3, 1), (4, 1)]
    backwards = [(mb, 1 - chunk) for mb, chunk in forwards]
    expected = [(FORWARD, *f) for f in forwards[:5]]
    for i in range(5):
        expected += [(FORWARD, *forwards[5 + i]), (BACKWARD, *backwards[i])]
    expected += [(BACKWARD, *b) for b in backwards[5:]]
    assert [(t.direction, t.micro_batch, t.chunk) for t in schedule.order(0)] == expected
    assert schedule.in_flight(0) == 6 and schedule.in_flight(1) == 4  # stage 1: (2 - 1 - 1) 2 + 3 = 3 warm-up


@pytest.mark.parametrize(
    "stages, m, group, message",
    [
        (4, 10, 0, r"interleaved 1F1B needs micro-batches \(10\) divisible by pp"),
        (4, 10, 3, r"3 must lie in \[pp = 4, micro-batches = 10\]"),
        (4, 10, 12, r"12 must lie in"),
        (4, 14, 6, r"14 micro-batches in groups of 6 leave 2, which Megatron-Core refuses unless 0 or >= pp \(4\)"),
    ],
)
def test_interleaved_groups_refused_as_megatron_core_refuses_them(stages, m, group, message):
    with pytest.raises(ConfigError, match=message):
        Interleaved(stages, m, 2, group=group).check()


@pytest.mark.parametrize("schedule", list(cases()))
def test_kind_counts_equal_the_walk_over_the_whole_order(schedule):
    """Counts and the order of first appearance (float sums over them keep their order), stage by stage."""
    walked = {}
    for stage in range(schedule.stages):
        counts = {}
        for task in schedule.order(stage):
            counts[kind_of(task)] = counts.get(kind_of(task), 0) + 1
        assert list(schedule.kind_counts(stage).items()) == list(counts.items())
        walked.update({(stage, kind): n for kind, n in counts.items()})
    assert list(task_counts(schedule).items()) == list(walked.items())
    assert shape_task_counts(schedule.shape) == walked


def test_kind_counts_by_hand():
    """1F1B + EP overlap, pp 4, m 10, stage 0: warm-up pp - 1 + 1 = 4 forwards, 6 F&B, 4 cool-down backwards.
    ZB1P pp 4, m 6, stage 3: m of each of F, Bi, W. DualPipe pp 4, m 12, rank 0: steps 1-3 run 2 + 2 + 1
    forwards of chunk 0 and 2 + 1 of chunk 1 (one Bi W pair), step 4 m / 2 - pp + 1 = 3 passes of F0&B1 F1&B0,
    steps 5-8 the rest of the 12 backwards (B1, then the last of each direction split into Bi and W)."""
    overlap = OneFOneB(4, 10, ep_overlap=True)
    f_and_b = Task(Phase.FORWARD_BACKWARD, 0, 0, (0, 0))
    assert overlap.kind_counts(0) == {Task(FORWARD, 0, 0): 4, f_and_b: 6, Task(BACKWARD, 0, 0): 4}
    assert ZeroBubble1P(4, 6).kind_counts(3) == {Task(phase, 0, 0): 6 for phase in (FORWARD, BACKWARD_INPUT, WEIGHT)}
    counts = DualPipe(4, 12).kind_counts(0)
    assert counts[Task(Phase.FORWARD_BACKWARD, 0, 0, (0, 1))] == 3
    assert counts[Task(Phase.FORWARD_BACKWARD, 0, 1, (0, 0))] == 3 + 1  # step 5 adds one F1&B0 on the outer rank
    assert sum(n for kind, n in counts.items() if kind.direction == FORWARD) == 12 - 3 - 4  # 5: F0 x 3, F1 x 2


@pytest.mark.parametrize("kind, stages, chunks, overlap, m", GROWING)
def test_kind_counts_cost_does_not_grow_with_micro_batches(kind, stages, chunks, overlap, m):
    """The tasks kind_counts walks are as many at 64 m as at m (the cut order's), fewer than the order's."""
    owner = DualPipe if kind is DualPipeV else kind
    small, large = (kind(stages, n, chunks, ep_overlap=overlap) for n in (m, 64 * m))
    walked = [tasks_drawn(owner, lambda s=s: [s.kind_counts(stage) for stage in range(stages)]) for s in (small, large)]
    shape_order.cache_clear()  # another test on this worker may have built these orders (they are shared by shape)
    whole = tasks_drawn(owner, lambda: [large.order(stage) for stage in range(stages)])
    assert walked[0] == walked[1] < whole


@pytest.mark.parametrize("schedule", list(cases()))
def test_index_step_equals_the_walk(schedule):
    """periodic.index_step (from kind counts) == the chunk-0 forwards stage 0's whole orders add per period."""

    def walked(m: int) -> int:
        order = schedule.resized(m).order(0)
        return sum(h[0] == FORWARD and h[2] == 0 for task in order for h in Schedule.halves(task))

    m = schedule.micro_batches
    for q in (1, 2, schedule.stages):
        assert index_step(schedule, m, q) == walked(m + q) - walked(m)
