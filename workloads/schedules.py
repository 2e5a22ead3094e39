"""Pipeline schedules: the order in which each stage runs its forward and backward tasks."""

from __future__ import annotations

from typing import NamedTuple

FORWARD = "F"
BACKWARD = "B"  # full backward: input and weight gradients
BACKWARD_INPUT = "Bi"  # input-gradient half of a split backward (zero-bubble's B; Qi et al., ICLR'24)
WEIGHT = "W"  # weight-gradient half, deferred to fill bubbles
FORWARD_BACKWARD = "F&B"  # a forward and a full backward of different micro-batches, overlapped


class Task(NamedTuple):
    """One forward or backward pass of one micro-batch through one model chunk of a stage."""

    direction: str
    micro_batch: int
    chunk: int  # virtual stage index on this stage (0 for plain 1F1B); DualPipe: the direction 0 or 1
    paired: tuple[int, int] | None = None  # F&B: (micro-batch, chunk) of the backward half


def one_f_one_b(stage: int, stages: int, micro_batches: int) -> list[Task]:
    """1F1B (PipeDream-flush): warm-up forwards, alternating steady state, cool-down backwards."""
    warmup = min(stages - stage - 1, micro_batches)
    order = [Task(FORWARD, mb, 0) for mb in range(warmup)]
    for i in range(micro_batches - warmup):
        order.append(Task(FORWARD, warmup + i, 0))
        order.append(Task(BACKWARD, i, 0))
    order += [Task(BACKWARD, mb, 0) for mb in range(micro_batches - warmup, micro_batches)]
    return order


def interleaved_one_f_one_b(stage: int, stages: int, micro_batches: int, chunks: int) -> list[Task]:
    """Megatron-LM's interleaved 1F1B (Narayanan et al., SC'21): micro-batches in groups of ``stages``."""
    total = micro_batches * chunks

    def forward(k: int) -> Task:
        group, within = divmod(k, stages * chunks)
        return Task(FORWARD, group * stages + within % stages, within // stages)

    def backward(k: int) -> Task:
        group, within = divmod(k, stages * chunks)
        return Task(BACKWARD, group * stages + within % stages, chunks - 1 - within // stages)

    warmup = min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)
    order = [forward(k) for k in range(warmup)]
    for i in range(total - warmup):
        order.append(forward(warmup + i))
        order.append(backward(i))
    order += [backward(k) for k in range(total - warmup, total)]
    return order


def dualpipe(stage: int, stages: int, micro_batches: int) -> list[Task]:
    """DualPipe (DeepSeek-V3 report Sec. 3.2.1; deepseek-ai/DualPipe ``DualPipe.step``, steps 1-8).

    Half of the micro-batches enter at stage 0 (chunk 0), half at the last stage (chunk 1). Phase p of a
    rank is direction p for the first half of the ranks and 1 - p for the second half.
    """
    half, half_rank = stages // 2, min(stage, stages - 1 - stage)
    flip = int(stage >= half)
    middle = half_rank == half - 1
    count = {FORWARD: [0, 0], BACKWARD: [0, 0]}
    deferred: list[tuple[int, int]] = []  # weight-gradient work waiting, FIFO (WeightGradStore)
    order: list[Task] = []

    def take(kind: str, phase: int) -> tuple[int, int]:
        chunk = phase ^ flip
        count[kind][chunk] += 1
        return count[kind][chunk] - 1, chunk

    def f(phase: int) -> None:
        order.append(Task(FORWARD, *take(FORWARD, phase)))

    def b(phase: int, zero_bubble: bool = False) -> None:
        mb, chunk = take(BACKWARD, phase)
        order.append(Task(BACKWARD_INPUT if zero_bubble else BACKWARD, mb, chunk))
        if zero_bubble:
            deferred.append((mb, chunk))

    def w() -> None:
        order.append(Task(WEIGHT, *deferred.pop(0)))

    def fb(f_phase: int, b_phase: int) -> None:
        forward = take(FORWARD, f_phase)
        order.append(Task(FORWARD_BACKWARD, *forward, paired=take(BACKWARD, b_phase)))

    outer = half - half_rank - 1
    for _ in range(2 * outer):  # step 1: nF0
        f(0)
    for _ in range(half_rank + 1):  # step 2: nF0F1
        f(0)
        f(1)
    for _ in range(outer):  # step 3: nB1W1F1 (zero bubble)
        b(1, zero_bubble=True)
        w()
        f(1)
    for i in range(micro_batches // 2 - stages + half_rank + 1):  # step 4: nF0B1F1B0
        if i == 0 and middle:  # the middle ranks do not overlap their first pair
            f(0)
            b(1)
        else:
            fb(0, 1)
        fb(1, 0)
    for _ in range(outer):  # step 5: nB1F1B0
        b(1)
        fb(1, 0)
    zero_bubble = False
    for i in range(half_rank + 1):  # step 6: nB1B0, the second half with zero bubble
        if i == (half_rank + 1) // 2 and half_rank % 2 == 1:
            zero_bubble = True
        b(1, zero_bubble)
        if i == (half_rank + 1) // 2 and half_rank % 2 == 0:
            zero_bubble = True
        b(0, zero_bubble)
    for _ in range(outer):  # step 7: nWB0 (zero bubble)
        w()
        b(0, zero_bubble=True)
    for _ in range(half_rank + 1):  # step 8: nW
        w()
    return order


def stage_order(schedule: str, stage: int, stages: int, micro_batches: int, chunks: int) -> list[Task]:
    """The task order of ``stage`` under ``schedule``."""
    if schedule == "dualpipe":
        return dualpipe(stage, stages, micro_batches)
    if schedule == "interleaved":
        return interleaved_one_f_one_b(stage, stages, micro_batches, chunks)
    return one_f_one_b(stage, stages, micro_batches)


def bubble_dualpipe_s(stages: int, f_and_b_s: float, backward_s: float, weight_s: float) -> float:
    """DualPipe's bubble (PP/2 - 1)(F&B + B - 3W) (deepseek-ai/DualPipe README, bubble table)."""
    return (stages / 2 - 1) * (f_and_b_s + backward_s - 3 * weight_s)


def bubble_fraction_1f1b(stages: int, micro_batches: int) -> float:
    """Idle fraction of 1F1B with equal stages: (p-1)/(m+p-1) (Narayanan et al., SC'21)."""
    return (stages - 1) / (micro_batches + stages - 1)
