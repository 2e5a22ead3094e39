"""DualPipe and DualPipeV (deepseek-ai/DualPipe; DeepSeek-V3 Sec. 3.2.1): micro-batches enter from both ends of
the pipeline and a forward and a backward chunk overlap (F&B)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from topologies.errors import ConfigError
from workloads.schedules.base import Schedule, SteadyCut
from workloads.schedules.pipeline_tasks import (
    BACKWARD,
    BACKWARD_INPUT,
    FORWARD,
    FORWARD_BACKWARD,
    WEIGHT,
    Phase,
    Task,
)


class DualPipe(Schedule):
    """DualPipe (DeepSeek-V3 report Sec. 3.2.1; deepseek-ai/DualPipe ``DualPipe.step``, steps 1-8).

    Stage s holds two chunks: chunk 0 is block s of the pipeline that runs stage 0 -> pp-1, chunk 1 is
    block pp-1-s of the pipeline that runs pp-1 -> 0 (two parameter copies). Half of the micro-batches
    enter at stage 0 (chunk 0), half at the last stage (chunk 1).
    """

    name = "dualpipe"
    fill_per_stage = 3

    def __init__(self, stages: int, micro_batches: int, chunks: int = 1, **overlap: Any) -> None:
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

    def __init__(self, stages: int, micro_batches: int, chunks: int = 1, **overlap: Any) -> None:
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

    def steady_cut(self, stage: int) -> SteadyCut:
        """DualPipe's of 2 pp ranks over 2 m micro-batches: every micro-batch adds its pass of step 4."""
        cut = DualPipe(2 * self.stages, 2 * self.micro_batches).steady_cut(stage)
        return SteadyCut(-(-cut.min_micro_batches // 2), cut.period // 2, cut.per_period)
