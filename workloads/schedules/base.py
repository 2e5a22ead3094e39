"""Pipeline schedules as objects: the task order of each stage, which layer block a chunk runs, the data
each task receives and sends, the activations a stage holds and the parameter blocks it keeps. What a task, a
flow and a block are: workloads/schedules/pipeline_tasks.py.

The schedules themselves: one_f_one_b.py, dualpipe.py; by name: registry.py (``SCHEDULES``).
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
    Flow,
    Phase,
    Task,
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
    group: int = 0

    def build(self) -> Schedule:
        return self.kind(
            self.stages,
            self.micro_batches,
            self.chunks,
            ep_overlap=self.ep_overlap,
            delay_wgrad=self.delay_wgrad,
            group=self.group,
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
    # Whether every task is a whole forward or a whole backward of one chunk (1F1B, interleaved), where FSDP / ZeRO-2/3
    # insert their per-unit all-gathers and reduce-scatters (workloads/graph/fsdp.py); not ZB's split backward nor
    # DualPipe's F&B pairs.
    whole_chunk_tasks: ClassVar[bool] = False
    # Whether Megatron-Core's host waits for the GPU at every pipeline exchange, so that it begins issuing a task only
    # as the task starts: its schedules without virtual stages exchange activations with batch_isend_irecv and then
    # torch.cuda.synchronize() (ModelParallelConfig batch_p2p_comm and batch_p2p_sync, both True; Megatron-LM's
    # arguments set batch_p2p_comm = not overlap_p2p_comm, and overlap_p2p_comm only with virtual stages). The
    # interleaved schedule's overlapped P2P does not: the host issues the next task as soon as it has issued this
    # one, until a host sync (simulator/engine/host_lead.py). Schedules Megatron-Core does not run keep True: their
    # host is not published, and it begins each task with the task, as it did before this was modelled.
    host_waits_at_exchange: ClassVar[bool] = True

    @property
    def combined_1f1b(self) -> bool:
        """Whether F&B tasks are issued layer by layer as one op list, both all-to-alls on one comm stream
        (workloads/graph/combined_1f1b.py: Megatron-Core's combined 1F1B, the order of DeepSeek-V3's Fig. 4) rather
        than as DualPipe's two concurrent lanes (workloads/graph/dualpipe_pairs.py)."""
        return True

    def __init__(
        self,
        stages: int,
        micro_batches: int,
        chunks: int = 1,
        *,
        ep_overlap: bool = False,
        delay_wgrad: bool = False,
        group: int = 0,
    ) -> None:
        self.stages, self.micro_batches, self.chunks = stages, micro_batches, chunks
        # Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm, --delay-wgrad-compute): see pair_steady
        self.ep_overlap, self.delay_wgrad = ep_overlap, delay_wgrad
        # the interleaved schedule's micro-batches per group (--microbatch-group-size-per-virtual-pipeline-stage;
        # 0: pp, Megatron-Core's default); the other schedules have none
        self.group = group

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
        within warm-up + 3 count tasks, whatever m is (tests/differential/test_order_shortcuts.py checks it against the walk)."""
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
            type(self), self.stages, self.micro_batches, self.chunks, self.ep_overlap, self.delay_wgrad, self.group
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
        first appearances come in the same order (tests/differential/test_order_shortcuts.py checks it against the walk)."""
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
