"""Pipeline schedules: the order in which each stage runs its forward and backward tasks."""

from __future__ import annotations

from typing import NamedTuple

FORWARD = "F"
BACKWARD = "B"


class Task(NamedTuple):
    """One forward or backward pass of one micro-batch through one model chunk of a stage."""

    direction: str
    micro_batch: int
    chunk: int  # virtual stage index on this stage (0 for plain 1F1B)


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


def stage_order(schedule: str, stage: int, stages: int, micro_batches: int, chunks: int) -> list[Task]:
    """The task order of ``stage`` under ``schedule``."""
    if schedule == "interleaved":
        return interleaved_one_f_one_b(stage, stages, micro_batches, chunks)
    return one_f_one_b(stage, stages, micro_batches)


def bubble_fraction_1f1b(stages: int, micro_batches: int) -> float:
    """Idle fraction of 1F1B with equal stages: (p-1)/(m+p-1) (Narayanan et al., SC'21)."""
    return (stages - 1) / (micro_batches + stages - 1)
