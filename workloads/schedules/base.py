"""Pipeline schedules as objects: the task order of each stage, which layer block a chunk runs, the data
each task receives and sends, the activations a stage holds and the parameter blocks it keeps. What a task, a
flow and a block are: workloads/schedules/pipeline_tasks.py.

``SCHEDULES`` (name -> class) is the only place a schedule's name is looked at.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import ClassVar, NamedTuple

from topologies.errors import ConfigError
from workloads.schedules.pipeline_tasks import (
    BACKWARD,
    BACKWARD_INPUT,
    FORWARD,
    FORWARD_BACKWARD,
    FORWARD_BACKWARD_DELAYED,
    PAIRED,
    WEIGHT,
    Flow,
    Phase,
    Task,
    kind_of,
    walked_counts,
)


class ScheduleShape(NamedTuple):
    """A schedule's class and arguments (``Schedule.shape``): a hashable key for what is derived from its orders."""

    kind: type
    stages: int
    micro_batches: int
    chunks: int
    ep_overlap: bool
    delay_wgrad: bool

    def build(self) -> Schedule:
        return self.kind(
            self.stages, self.micro_batches, self.chunks, ep_overlap=self.ep_overlap, delay_wgrad=self.delay_wgrad
        )


# Stage orders kept (``shape_order``): a step asks for each of its stages' orders up to three times (the engine, the
# send forecast, the bubble replay), over two or three shapes with the steady shortcut; a search point's shapes
# are few. An order of 512 micro-batches over 4 chunks is ~4,000 tasks (~0.4 MB): 64 of them stay under ~30 MB.
ORDERS_KEPT = 64


@lru_cache(maxsize=ORDERS_KEPT)
def shape_order(shape: ScheduleShape, stage: int) -> tuple[Task, ...]:
    """The order of ``stage`` of the schedule ``shape`` builds, once per (shape, stage): equal shapes run equal
    orders (``Schedule.shape``), and building one walks every task."""
    return tuple(shape.build().lazy_order(stage))


class SteadyCut(NamedTuple):
    """How a stage's order grows past ``min_micro_batches``: every ``period`` more micro-batches add one steady
    period, whose task kinds (``kind_of``) are ``per_period``."""

    min_micro_batches: int
    period: int
    per_period: dict[Task, int]


class Schedule:
    """A pipeline schedule over ``stages`` stages and ``micro_batches`` micro-batches per step."""

    name: ClassVar[str]
    virtual_stages: ClassVar[bool] = False  # whether a stage may hold several model chunks (layout.virtual_stages)
    # Micro-batches per stage the warm-up and cool-down take before a step of them has a steady state that
    # repeats (simulator/fast/periodic.py starts looking there): 1 for the 1F1B family, whose warm-up is pp - 1
    # forwards (ZB1P defers at most pp - 1 W passes; interleaved fills in about pp + (pp - 2) / v, mostly
    # inside the three periods of pp the start adds); DualPipe(V), whose micro-batches enter from both ends, 3
    # (DualPipeV at PP 8 first repeats at 24 micro-batches). Where a start is too early the lock check fails
    # and the next, doubled, count is tried: the start only sets what the shortcut costs, never its result.
    fill_per_stage: ClassVar[int] = 1

    @property
    def combined_1f1b(self) -> bool:
        """Whether F&B tasks are issued layer by layer as one op list, both all-to-alls on one comm stream
        (workloads/graph/combined_1f1b.py: Megatron-Core's combined 1F1B, the order of DeepSeek-V3's Fig. 4) rather
        than as DualPipe's two concurrent lanes (workloads/graph/dualpipe_pairs.py)."""
        return True

    def __init__(
        self, stages: int, micro_batches: int, chunks: int = 1, *, ep_overlap: bool = False, delay_wgrad: bool = False
    ) -> None:
        self.stages, self.micro_batches, self.chunks = stages, micro_batches, chunks
        # Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm, --delay-wgrad-compute): see pair_steady
        self.ep_overlap, self.delay_wgrad = ep_overlap, delay_wgrad

    # --- what a schedule defines ---------------------------------------------------------------------
    def lazy_order(self, stage: int) -> Iterator[Task]:
        """The tasks of ``stage``, in the order it runs them, built as they are taken: a prefix costs its length."""
        raise NotImplementedError

    @property
    def blocks(self) -> int:
        """Layer blocks the model is cut into (one per (stage, chunk) of the forward pipeline)."""
        return self.stages * self.chunks

    def block_of(self, stage: int, chunk: int) -> int:
        """The layer block chunk ``chunk`` of ``stage`` runs."""
        return chunk * self.stages + stage

    def successor(self, stage: int, chunk: int) -> tuple[int, int] | None:
        """The (stage, chunk) that runs the next block of the forward pass, or None at the last block."""
        if stage < self.stages - 1:
            return stage + 1, chunk
        return (0, chunk + 1) if chunk < self.chunks - 1 else None

    def predecessor(self, stage: int, chunk: int) -> tuple[int, int] | None:
        """The (stage, chunk) that runs the previous block, or None at block 0."""
        if stage > 0:
            return stage - 1, chunk
        return (self.stages - 1, chunk - 1) if chunk > 0 else None

    def stage_blocks(self, stage: int) -> tuple[int, ...]:
        """The blocks whose parameters ``stage`` holds."""
        return tuple(self.block_of(stage, chunk) for chunk in range(self.chunks))

    def in_flight(self, stage: int) -> int:
        """Forward activations (in chunks) ``stage`` holds at its peak."""
        raise NotImplementedError

    def check(self) -> None:
        """Raise ConfigError if the schedule cannot run these stages and micro-batches."""

    # --- derived from the above ----------------------------------------------------------------------
    def order(self, stage: int) -> list[Task]:
        """The tasks of ``stage``, in the order it runs them (built once per shape and stage: ``shape_order``)."""
        return list(shape_order(self.shape, stage))

    def forward_chunks(self, stage: int, count: int) -> tuple[int, ...]:
        """The chunks of the first ``count`` forward halves (F tasks, F&B's forward) of ``stage``'s order (fewer if
        it has fewer), from the prefix of the lazy order that holds them: the same as walking the whole order.

        NOTE: the prefix does not grow with the micro-batches for ``count = in_flight(stage)``: every order opens
        with its warm-up, a fixed number of tasks, then alternates forwards (F, or F&B) with at most two other
        tasks (1F1B and interleaved: B; ZB1P: Bi, W; DualPipe(V): step 2 runs F0 F1, step 3 B1 W1 F1, step 4
        pairs F&B), and the micro-batches set only how long the alternation runs; so the count-th forward comes
        within warm-up + 3 count tasks, whatever m is (tests/test_order_shortcuts.py checks it against the walk)."""
        chunks: list[int] = []
        if count <= 0:
            return ()
        for task in self.lazy_order(stage):
            for phase, _, chunk in self.halves(task):
                if phase == FORWARD:
                    chunks.append(chunk)
                    if len(chunks) == count:
                        return tuple(chunks)
        return tuple(chunks)

    @property
    def shape(self) -> ScheduleShape:
        """What sets this schedule's orders: equal shapes run equal orders."""
        return ScheduleShape(
            type(self), self.stages, self.micro_batches, self.chunks, self.ep_overlap, self.delay_wgrad
        )

    def resized(self, micro_batches: int) -> Schedule:
        """The same schedule (stages, chunks, overlap) over ``micro_batches`` micro-batches."""
        return self.shape._replace(micro_batches=micro_batches).build()

    def steady_cut(self, stage: int) -> SteadyCut | None:
        """How the order of ``stage`` grows with the micro-batches (``SteadyCut``), or None: count by walking."""
        return None

    def kind_counts(self, stage: int) -> dict[Task, int]:
        """How many tasks of each kind (``kind_of``) ``stage``'s order runs, in the order of their first appearance
        (what a walk over the whole order counts), at a cost that does not grow with the micro-batches: the walk
        over the order with whole steady periods cut (``SteadyCut``), plus the cut periods' kinds.

        Why it is the walk: the order at m is the order at m - k q with k more steady periods, each of the same
        kinds (``SteadyCut.per_period``), inserted where the steady state repeats; warm-up and cool-down keep their
        kinds (only micro-batch indices shift). The shorter order keeps at least one whole period of its steady
        state, so every kind of the inserted periods appears in it before the point they are inserted at, and the
        first appearances come in the same order (tests/test_order_shortcuts.py checks it against the walk)."""
        cut, m = self.steady_cut(stage), self.micro_batches
        periods = (m - cut.min_micro_batches) // cut.period if cut is not None else 0
        if periods <= 0:
            return walked_counts(self.lazy_order(stage))
        counts = walked_counts(self.resized(m - periods * cut.period).lazy_order(stage))
        for kind, times in cut.per_period.items():
            counts[kind] += periods * times
        return counts

    @staticmethod
    def halves(task: Task) -> list[tuple[Phase, int, int]]:
        """(FORWARD or BACKWARD, micro-batch, chunk) of the data-moving halves of a task (W moves none)."""
        if task.direction == FORWARD:
            return [(FORWARD, task.micro_batch, task.chunk)]
        if task.direction in (BACKWARD, BACKWARD_INPUT):
            return [(BACKWARD, task.micro_batch, task.chunk)]
        if task.direction in PAIRED:
            assert task.paired is not None
            return [(FORWARD, task.micro_batch, task.chunk), (BACKWARD, *task.paired)]
        return []

    @staticmethod
    def task_chunks(task: Task) -> tuple[int, ...]:
        """The chunk of each half of the task's op list (F&B: forward chunk, then backward chunk)."""
        return (task.chunk, task.paired[1]) if task.paired is not None else (task.chunk,)

    def inputs(self, stage: int, task: Task) -> list[Flow]:
        """The activations and gradients ``task`` must receive before it starts."""
        needed = []
        for direction, mb, chunk in self.halves(task):
            source = self.predecessor(stage, chunk) if direction == FORWARD else self.successor(stage, chunk)
            if source is not None:
                needed.append(Flow(direction, mb, chunk, stage))
        return needed

    def outputs(self, stage: int, task: Task) -> list[Flow]:
        """What ``task`` sends when it ends, each keyed by its receiving (stage, chunk)."""
        sent = []
        for direction, mb, chunk in self.halves(task):
            target = self.successor(stage, chunk) if direction == FORWARD else self.predecessor(stage, chunk)
            if target is not None:
                sent.append(Flow(direction, mb, target[1], target[0]))
        return sent

    # --- Megatron-Core EP communication overlap (combined 1F1B) ---------------------------------------
    @property
    def extra_warmup(self) -> int:
        """Forwards added to the warm-up so that each steady-state forward can pair with a backward of an
        earlier micro-batch (with ep_overlap; the last stage would otherwise pair a chunk with itself)."""
        return int(self.ep_overlap)

    def pair_steady(self, forward: Task, backward: Task) -> list[Task]:
        """A steady-state forward and backward: as they are, or with ``ep_overlap`` one F&B task (Megatron-Core
        ``combined_1f1b_schedule_for_interleaved_pipelining``: one micro-batch's dispatch / combine hides behind
        the other's compute); with ``delay_wgrad`` the backward half delays each layer's weight gradients as
        ``TransformerLayerSchedulePlan.run`` does (megatron/core/models/common/model_chunk_schedule_plan.py)."""
        if not self.ep_overlap:
            return [forward, backward]
        phase = FORWARD_BACKWARD_DELAYED if self.delay_wgrad else FORWARD_BACKWARD
        return [Task(phase, forward.micro_batch, forward.chunk, (backward.micro_batch, backward.chunk))]

    def check_overlap(self) -> None:
        """Megatron-Core's requirements: delay_wgrad needs ep_overlap; with pp > 1, virtual stages."""
        if self.delay_wgrad and not self.ep_overlap:
            raise ConfigError("layout.delay_wgrad", "needs ep_overlap (Megatron-Core --delay-wgrad-compute)")
        if self.ep_overlap and self.stages > 1 and not self.virtual_stages:
            raise ConfigError("layout.ep_overlap", f"pp > 1 needs the interleaved schedule (not {self.name})")


class OneFOneB(Schedule):
    """1F1B (PipeDream-flush): warm-up forwards, alternating steady state, cool-down backwards."""

    name = "1f1b"

    def lazy_order(self, stage: int) -> Iterator[Task]:
        m = self.micro_batches
        warmup = min(self.stages - stage - 1 + self.extra_warmup, m)
        for mb in range(warmup):
            yield Task(FORWARD, mb, 0)
        for i in range(m - warmup):
            yield from self.pair_steady(Task(FORWARD, warmup + i, 0), Task(BACKWARD, i, 0))
        for mb in range(m - warmup, m):
            yield Task(BACKWARD, mb, 0)

    def in_flight(self, stage: int) -> int:
        return min(self.stages - stage + self.extra_warmup, self.micro_batches)

    def steady_cut(self, stage: int) -> SteadyCut:
        """Past the full warm-up and one steady pair, each micro-batch adds a forward and a backward (F&B)."""
        steady = self.pair_steady(Task(FORWARD, 0, 0), Task(BACKWARD, 0, 0))
        return SteadyCut(self.stages - stage + self.extra_warmup, 1, walked_counts(steady))

    def check(self) -> None:
        self.check_overlap()


class ZeroBubble1P(Schedule):
    """ZB-H1 (Qi et al., ICLR'24 "Zero Bubble Pipeline Parallelism", Sec. 3.1; deepseek-ai/DualPipe's ZB1P):
    1F1B with the backward split into Bi and W; stage s defers s W passes to the cool-down, where they fill
    the bubble. Bubble (PP-1)(F + B - 2W) with B = Bi + W the full backward; activations of PP micro-batches
    on every stage (a micro-batch's are held until its W)."""

    name = "zb1p"

    def lazy_order(self, stage: int) -> Iterator[Task]:
        m, warmup = self.micro_batches, self.stages - stage - 1
        count = {FORWARD: 0, BACKWARD_INPUT: 0, WEIGHT: 0}

        def run(*phases: Phase) -> Iterator[Task]:
            for phase in phases:
                yield Task(phase, count[phase], 0)
                count[phase] += 1

        for _ in range(warmup):
            yield from run(FORWARD)
        for _ in range(stage):  # W deferred
            yield from run(FORWARD, BACKWARD_INPUT)
        for _ in range(m - warmup - stage):
            yield from run(FORWARD, BACKWARD_INPUT, WEIGHT)
        for _ in range(warmup):
            yield from run(BACKWARD_INPUT, WEIGHT)
        for _ in range(stage):
            yield from run(WEIGHT)

    def in_flight(self, stage: int) -> int:
        return self.stages  # warm-up (pp-s-1) plus s forwards whose W waits, plus the steady-state one

    def steady_cut(self, stage: int) -> SteadyCut:
        """Past pp - 1 micro-batches (warm-up and deferred W) and one steady F Bi W, each adds an F, a Bi and a W."""
        return SteadyCut(self.stages, 1, {Task(phase, 0, 0): 1 for phase in (FORWARD, BACKWARD_INPUT, WEIGHT)})

    def check(self) -> None:
        self.check_overlap()
        if self.micro_batches < self.stages:
            raise ConfigError(
                "global_batch", f"ZB1P needs at least pp ({self.stages}) micro-batches, got {self.micro_batches}"
            )


class Interleaved(Schedule):
    """Megatron-LM's interleaved 1F1B (Narayanan et al., SC'21): micro-batches in groups of ``stages``."""

    name = "interleaved"
    virtual_stages = True

    def _warmup(self, stage: int) -> int:
        return (self.stages - stage - 1) * 2 + (self.chunks - 1) * self.stages

    def lazy_order(self, stage: int) -> Iterator[Task]:
        stages, chunks = self.stages, self.chunks
        total = self.micro_batches * chunks

        def forward(k: int) -> Task:
            group, within = divmod(k, stages * chunks)
            return Task(FORWARD, group * stages + within % stages, within // stages)

        def backward(k: int) -> Task:
            group, within = divmod(k, stages * chunks)
            return Task(BACKWARD, group * stages + within % stages, chunks - 1 - within // stages)

        warmup = min(self._warmup(stage) + self.extra_warmup, total)
        for k in range(warmup):
            yield forward(k)
        for i in range(total - warmup):
            yield from self.pair_steady(forward(warmup + i), backward(i))
        for k in range(total - warmup, total):
            yield backward(k)

    def in_flight(self, stage: int) -> int:
        return min(self._warmup(stage) + 1 + self.extra_warmup, self.micro_batches * self.chunks)

    def steady_cut(self, stage: int) -> SteadyCut:
        """Past the full warm-up and one whole steady period (pp v steady pairs), each pp micro-batches add pp v
        steady pairs: forward k = warm-up + i with backward i for i over a period, whose chunks repeat every pp v
        (a group of pp micro-batches per chunk), so any pp v consecutive pairs have the same kinds."""
        stages, chunks = self.stages, self.chunks
        group = stages * chunks
        warmup = self._warmup(stage) + self.extra_warmup
        kinds: dict[Task, int] = {}
        for i in range(group):
            forward = Task(FORWARD, 0, (warmup + i) % group // stages)
            backward = Task(BACKWARD, 0, chunks - 1 - i % group // stages)
            for kind in map(kind_of, self.pair_steady(forward, backward)):
                kinds[kind] = kinds.get(kind, 0) + 1
        return SteadyCut(-(-warmup // chunks) + stages, stages, kinds)

    def check(self) -> None:
        self.check_overlap()
        if self.micro_batches % self.stages:
            raise ConfigError(
                "global_batch", f"interleaved 1F1B needs micro-batches ({self.micro_batches}) divisible by pp"
            )


class DualPipe(Schedule):
    """DualPipe (DeepSeek-V3 report Sec. 3.2.1; deepseek-ai/DualPipe ``DualPipe.step``, steps 1-8).

    Stage s holds two chunks: chunk 0 is block s of the pipeline that runs stage 0 -> pp-1, chunk 1 is
    block pp-1-s of the pipeline that runs pp-1 -> 0 (two parameter copies). Half of the micro-batches
    enter at stage 0 (chunk 0), half at the last stage (chunk 1).
    """

    name = "dualpipe"
    fill_per_stage = 3

    def __init__(self, stages: int, micro_batches: int, chunks: int = 1, **overlap: bool) -> None:
        super().__init__(stages, micro_batches, 1, **overlap)  # the F&B pairs are DualPipe's own (step 4)

    @property
    def combined_1f1b(self) -> bool:
        """With ep_overlap, an F&B pair's components in the order of DeepSeek-V3's Fig. 4 (Sec. 3.2.1: each chunk
        cut into attention, dispatch, MLP and combine, the backward's split into input and weight parts,
        rearranged so that both all-to-alls hide behind the other chunk's compute), which Megatron-Core's
        combined 1F1B issues; without, the forward and the backward as two concurrent lanes."""
        return self.ep_overlap

    def pair_steady(self, forward: Task, backward: Task) -> list[Task]:
        """A forward and a backward as they are: DualPipe's F&B pairs are its own (step 4, a block with its
        mirror), made by its order, never by Megatron-Core's pairing."""
        return [forward, backward]

    def block_of(self, stage: int, chunk: int) -> int:
        return stage if chunk == 0 else self.stages - 1 - stage

    def successor(self, stage: int, chunk: int) -> tuple[int, int] | None:
        nxt = stage + 1 if chunk == 0 else stage - 1
        return (nxt, chunk) if 0 <= nxt < self.stages else None

    def predecessor(self, stage: int, chunk: int) -> tuple[int, int] | None:
        prev = stage - 1 if chunk == 0 else stage + 1
        return (prev, chunk) if 0 <= prev < self.stages else None

    def stage_blocks(self, stage: int) -> tuple[int, ...]:
        return stage, self.stages - 1 - stage

    def in_flight(self, stage: int) -> int:
        return min(self.stages + 1, self.micro_batches)  # PP + 1 chunks on every rank (DualPipe README)

    def steady_cut(self, stage: int) -> SteadyCut:
        """Every 2 micro-batches add one pass of step 4 (F0&B1, F1&B0); the other steps do not depend on the
        micro-batches. Kept: 2 passes, so that the middle ranks' first, unpaired, pass is followed by a paired one."""
        half_rank, flip = min(stage, self.stages - 1 - stage), int(stage >= self.stages // 2)
        pairs = {Task(FORWARD_BACKWARD, 0, flip, (0, 1 ^ flip)): 1, Task(FORWARD_BACKWARD, 0, 1 ^ flip, (0, flip)): 1}
        return SteadyCut(2 * (self.stages - half_rank + 1), 2, pairs)

    def check(self) -> None:
        pp, m = self.stages, self.micro_batches
        if pp % 2 or m % 2 or m < 2 * pp:
            raise ConfigError(
                "layout.pp",
                f"DualPipe needs an even pp ({pp}) and an even number of "
                f"micro-batches ({m}) of at least 2 x pp (deepseek-ai/DualPipe)",
            )
        self.check_own_weight_passes()

    def check_own_weight_passes(self) -> None:
        if self.delay_wgrad:
            raise ConfigError(
                "layout.delay_wgrad", f"{self.name} runs its own weight-gradient passes (W): unset delay_wgrad"
            )

    def lazy_order(self, stage: int) -> Iterator[Task]:
        """Phase p of a rank is direction p for the first half of the ranks and 1 - p for the second."""
        stages, micro_batches = self.stages, self.micro_batches
        half, half_rank = stages // 2, min(stage, stages - 1 - stage)
        flip = int(stage >= half)
        middle = half_rank == half - 1
        count = {FORWARD: [0, 0], BACKWARD: [0, 0]}
        deferred: list[tuple[int, int]] = []  # weight-gradient work waiting, FIFO (WeightGradStore)

        def take(kind: Phase, phase: int) -> tuple[int, int]:
            chunk = phase ^ flip
            count[kind][chunk] += 1
            return count[kind][chunk] - 1, chunk

        def f(phase: int) -> Task:
            return Task(FORWARD, *take(FORWARD, phase))

        def b(phase: int, zero_bubble: bool = False) -> Task:
            mb, chunk = take(BACKWARD, phase)
            if zero_bubble:
                deferred.append((mb, chunk))
            return Task(BACKWARD_INPUT if zero_bubble else BACKWARD, mb, chunk)

        def w() -> Task:
            return Task(WEIGHT, *deferred.pop(0))

        def fb(f_phase: int, b_phase: int) -> Task:
            forward = take(FORWARD, f_phase)
            return Task(FORWARD_BACKWARD, *forward, paired=take(BACKWARD, b_phase))

        outer = half - half_rank - 1
        for _ in range(2 * outer):  # step 1: nF0
            yield f(0)
        for _ in range(half_rank + 1):  # step 2: nF0F1
            yield f(0)
            yield f(1)
        for _ in range(outer):  # step 3: nB1W1F1 (zero bubble)
            yield b(1, zero_bubble=True)
            yield w()
            yield f(1)
        for i in range(micro_batches // 2 - stages + half_rank + 1):  # step 4: nF0B1F1B0
            if i == 0 and middle:  # the middle ranks do not overlap their first pair
                yield f(0)
                yield b(1)
            else:
                yield fb(0, 1)
            yield fb(1, 0)
        for _ in range(outer):  # step 5: nB1F1B0
            yield b(1)
            yield fb(1, 0)
        zero_bubble = False
        for i in range(half_rank + 1):  # step 6: nB1B0, the second half with zero bubble
            if i == (half_rank + 1) // 2 and half_rank % 2 == 1:
                zero_bubble = True
            yield b(1, zero_bubble)
            if i == (half_rank + 1) // 2 and half_rank % 2 == 0:
                zero_bubble = True
            yield b(0, zero_bubble)
        for _ in range(outer):  # step 7: nWB0 (zero bubble)
            yield w()
            yield b(0, zero_bubble=True)
        for _ in range(half_rank + 1):  # step 8: nW
            yield w()


class DualPipeV(Schedule):
    """DualPipeV (deepseek-ai/DualPipe ``dualpipev.py``; Sea AI Lab's "cut-in-half" of DualPipe): the model in
    2 x pp blocks, stage s holding block s (chunk 0) and block 2pp-1-s (chunk 1), one parameter copy. Every
    micro-batch runs down chunk 0 from stage 0 to pp-1, turns there to chunk 1 and runs back to stage 0 (the
    head). Rank s's task order is DualPipe's rank s of 2 pp ranks with 2m micro-batches (steps 1-8)."""

    name = "dualpipev"
    fill_per_stage = 3
    combined_1f1b = DualPipe.combined_1f1b
    check_own_weight_passes = DualPipe.check_own_weight_passes
    pair_steady = DualPipe.pair_steady

    def __init__(self, stages: int, micro_batches: int, chunks: int = 1, **overlap: bool) -> None:
        super().__init__(stages, micro_batches, 2, **overlap)

    def block_of(self, stage: int, chunk: int) -> int:
        return stage if chunk == 0 else 2 * self.stages - 1 - stage

    def successor(self, stage: int, chunk: int) -> tuple[int, int] | None:
        if chunk == 0:
            return (stage + 1, 0) if stage < self.stages - 1 else (stage, 1)  # the turn stays on the stage
        return (stage - 1, 1) if stage > 0 else None

    def predecessor(self, stage: int, chunk: int) -> tuple[int, int] | None:
        if chunk == 1:
            return (stage + 1, 1) if stage < self.stages - 1 else (stage, 0)
        return (stage - 1, 0) if stage > 0 else None

    def in_flight(self, stage: int) -> int:
        return min(2 * self.stages + 1, 2 * self.micro_batches)  # PP + 1 half-size chunks (DualPipe README)

    def check(self) -> None:
        if self.micro_batches < 2 * self.stages:
            raise ConfigError(
                "layout.pp",
                f"DualPipeV needs at least 2 x pp ({2 * self.stages}) micro-batches, got {self.micro_batches}",
            )
        self.check_own_weight_passes()

    def lazy_order(self, stage: int) -> Iterator[Task]:
        return DualPipe(2 * self.stages, 2 * self.micro_batches).lazy_order(stage)

    def kind_counts(self, stage: int) -> dict[Task, int]:
        return DualPipe(2 * self.stages, 2 * self.micro_batches).kind_counts(stage)


SCHEDULES: dict[str, type[Schedule]] = {
    cls.name: cls for cls in (OneFOneB, ZeroBubble1P, Interleaved, DualPipe, DualPipeV)
}


def block_count(name: str, stages: int, chunks: int = 1) -> int:
    """Layer blocks schedule ``name`` cuts the model into over ``stages`` (pp x chunks; DualPipe pp, DualPipeV
    2 pp): the micro-batch count does not change them."""
    return make_schedule(name, stages, 1, chunks).blocks


def make_schedule(name: str, stages: int, micro_batches: int, chunks: int = 1, **overlap: bool) -> Schedule:
    """The schedule called ``name`` (a LayoutSpec.schedule value); ``overlap``: ep_overlap, delay_wgrad."""
    if name not in SCHEDULES:
        raise ConfigError("layout.schedule", f"must be one of {', '.join(SCHEDULES)}")
    return SCHEDULES[name](stages, micro_batches, chunks, **overlap)


def bubble_dualpipe_s(stages: int, f_and_b_s: float, backward_s: float, weight_s: float) -> float:
    """DualPipe's bubble (PP/2 - 1)(F&B + B - 3W) (deepseek-ai/DualPipe README, bubble table)."""
    return (stages / 2 - 1) * (f_and_b_s + backward_s - 3 * weight_s)


def bubble_zb1p_s(stages: int, forward_s: float, backward_s: float, weight_s: float) -> float:
    """ZB1P's bubble (PP - 1)(F + B - 2W), B the full backward (deepseek-ai/DualPipe README; Qi et al. ZB-H1)."""
    return (stages - 1) * (forward_s + backward_s - 2 * weight_s)


def bubble_fraction_1f1b(stages: int, micro_batches: int) -> float:
    """Idle fraction of 1F1B with equal stages: (p-1)/(m+p-1) (Narayanan et al., SC'21)."""
    return (stages - 1) / (micro_batches + stages - 1)
