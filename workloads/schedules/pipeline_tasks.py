"""What a pipeline schedule is made of (workloads/schedules/base.py orders them): a task's phase, the task (a pass of one
micro-batch through one model chunk of a stage), the activation or gradient it receives or sends, the layer block
a chunk runs and the key of identical op lists; and the kind of a task, what tasks of equal op lists share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from workloads.ops import Label, LayerKind


class Phase(Label):
    """What a pipeline task computes."""

    FORWARD = "F"
    BACKWARD = "B"  # full backward: input and weight gradients
    BACKWARD_INPUT = "Bi"  # input-gradient half of a split backward (zero-bubble's B; Qi et al., ICLR'24)
    WEIGHT = "W"  # weight-gradient half, deferred to fill bubbles
    FORWARD_BACKWARD = "F&B"  # a forward and a full backward of different micro-batches, overlapped
    # F&B whose backward issues each layer's weight gradients where Megatron-Core's --delay-wgrad-compute
    # puts them (workloads/graph/combined_1f1b.py): the experts' before the layer's dispatch backward is issued
    FORWARD_BACKWARD_DELAYED = "F&Bdw"


FORWARD, BACKWARD, BACKWARD_INPUT, WEIGHT, FORWARD_BACKWARD, FORWARD_BACKWARD_DELAYED = Phase
PAIRED = (FORWARD_BACKWARD, FORWARD_BACKWARD_DELAYED)  # phases whose tasks run two micro-batches on two lanes


class Task(NamedTuple):
    """One forward or backward pass of one micro-batch through one model chunk of a stage."""

    direction: Phase
    micro_batch: int
    chunk: int  # virtual stage index on this stage (0 for plain 1F1B); DualPipe: the direction 0 or 1
    paired: tuple[int, int] | None = None  # F&B: (micro-batch, chunk) of the backward half


class Flow(NamedTuple):
    """An activation (FORWARD) or gradient (BACKWARD) of a micro-batch arriving at (stage, chunk)."""

    direction: Phase
    micro_batch: int
    chunk: int
    stage: int


@dataclass(frozen=True)
class Block:
    """What sets a layer block's op list: embedding / head (and MTP) on it, and the kind of each layer."""

    first: bool
    last: bool
    layers: tuple[LayerKind, ...]


@dataclass(frozen=True)
class TaskKey:
    """Tasks with equal keys have identical op lists: the phase and the block of each half (F&B: two)."""

    phase: Phase
    blocks: tuple[Block, ...]


def kind_of(task: Task) -> Task:
    """The task with its micro-batch indices 0: tasks of one kind on a stage run the same op list."""
    return task._replace(micro_batch=0, paired=task.paired and (0, task.paired[1]))


def walked_counts(order: Iterable[Task]) -> dict[Task, int]:
    """How many tasks of each kind ``order`` has, in the order of their first appearance."""
    counts: dict[Task, int] = {}
    for task in order:
        kind = kind_of(task)
        counts[kind] = counts.get(kind, 0) + 1
    return counts
