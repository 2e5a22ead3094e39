"""The 1F1B family: plain 1F1B (Narayanan et al., SC'21), zero-bubble ZB1P (Qi et al., ZB-H1) and interleaved
1F1B with virtual stages (Megatron-LM's interleaved schedule)."""

from __future__ import annotations

from collections.abc import Iterator

from topologies.errors import ConfigError
from workloads.schedules.base import Schedule, SteadyCut
from workloads.schedules.pipeline_tasks import (
    BACKWARD,
    BACKWARD_INPUT,
    FORWARD,
    WEIGHT,
    Phase,
    Task,
    kind_of,
    walked_counts,
)


class OneFOneB(Schedule):
    """1F1B (PipeDream-flush): warm-up forwards, alternating steady state, cool-down backwards."""

    name = "1f1b"
    whole_chunk_tasks = True

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
    """Megatron-LM's interleaved 1F1B (Narayanan et al., SC'21): micro-batches in groups of N (``group``, Megatron's
    --microbatch-group-size-per-virtual-pipeline-stage, pp by default), each group through every chunk in turn, the
    last group holding what is left (Megatron-Core schedules.py get_schedule_table and get_pp_rank_microbatches at
    d98e8a64: warm-up (pp - rank - 1) 2 + (v - 1) N forwards)."""

    name = "interleaved"
    host_waits_at_exchange = False  # --overlap-p2p-communication, Megatron-LM's default with virtual stages
    virtual_stages = True
    whole_chunk_tasks = True

    @property
    def group_size(self) -> int:
        """Micro-batches per group (N)."""
        return self.group or self.stages

    def _warmup(self, stage: int) -> int:
        return (self.stages - stage - 1) * 2 + (self.chunks - 1) * self.group_size

    def _table(self, k: int) -> tuple[int, int]:
        """The (micro-batch, chunk) of the k-th forward (get_schedule_table): whole groups of N, then the rest."""
        n, chunks = self.group_size, self.chunks
        whole = self.micro_batches // n * n  # micro-batches in whole groups
        if k < whole * chunks:
            group, within = divmod(k, n * chunks)
            return group * n + within % n, within // n
        rest = self.micro_batches - whole
        chunk, index = divmod(k - whole * chunks, rest)
        return whole + index, chunk

    def lazy_order(self, stage: int) -> Iterator[Task]:
        chunks = self.chunks
        total = self.micro_batches * chunks

        def forward(k: int) -> Task:
            return Task(FORWARD, *self._table(k))

        def backward(k: int) -> Task:
            micro_batch, chunk = self._table(k)
            return Task(BACKWARD, micro_batch, chunks - 1 - chunk)

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
        """Past the full warm-up, one whole steady period (N v steady pairs) and the last group's rest (r = m mod N,
        which a count N apart keeps), each N micro-batches add N v steady pairs: a whole group inserted before the
        rest, forward k = warm-up + i with backward i for i over a period, whose chunks repeat every N v, so any N v
        consecutive pairs of the whole groups have the same kinds."""
        n, chunks = self.group_size, self.chunks
        period = n * chunks
        warmup = self._warmup(stage) + self.extra_warmup
        kinds: dict[Task, int] = {}
        for i in range(period):
            forward = Task(FORWARD, 0, (warmup + i) % period // n)
            backward = Task(BACKWARD, 0, chunks - 1 - i % period // n)
            for kind in map(kind_of, self.pair_steady(forward, backward)):
                kinds[kind] = kinds.get(kind, 0) + 1
        return SteadyCut(-(-warmup // chunks) + n + self.micro_batches % n, n, kinds)

    def check(self) -> None:
        self.check_overlap()
        n, m = self.group_size, self.micro_batches
        if self.group and not self.stages <= n <= m:
            flag = "--microbatch-group-size-per-virtual-pipeline-stage"
            raise ConfigError(flag, f"{n} must lie in [pp = {self.stages}, micro-batches = {m}] (Megatron-Core)")
        if not self.group and m % n:
            raise ConfigError("global_batch", f"interleaved 1F1B needs micro-batches ({m}) divisible by pp")
        if 0 < m % n < self.stages:
            raise ConfigError(
                "global_batch",
                f"{m} micro-batches in groups of {n} leave {m % n}, which Megatron-Core refuses unless 0 or >= pp "
                f"({self.stages})",
            )
