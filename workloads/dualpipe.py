"""DualPipe's task op lists and data flow (DeepSeek-V3 report Sec. 3.2.1; deepseek-ai/DualPipe).

Stage s holds two chunks of L/pp layers each: chunk 0 is layer block s of the pipeline that runs
stage 0 -> pp-1, chunk 1 is block pp-1-s of the pipeline that runs pp-1 -> 0 (two parameter copies).
A split backward is the full backward's op list without its weight-gradient GEMMs (``.wgrad`` ops,
Bi) and those GEMMs alone (W); nothing in a backward depends on a weight gradient, so the split is
exact. An F&B task runs a forward and a full backward op list concurrently, each on its own lane
(compute and comm streams) with the GPU's compute shared between the lanes (simulator.tasks), so one
lane's communication hides behind the other's compute, as DeepSeek's overlapped_forward_backward does.
"""

from __future__ import annotations

from dataclasses import replace

from workloads.ops import COMPUTE, Op
from workloads.schedules import BACKWARD, BACKWARD_INPUT, FORWARD, FORWARD_BACKWARD, WEIGHT, Task

WGRAD_SUFFIX = ".wgrad"  # workloads.tasks names weight-gradient GEMMs "<step>.wgrad"

FlowKey = tuple[str, int, int, int]  # (FORWARD activation or BACKWARD gradient, micro-batch, chunk, stage)


def position(stage: int, chunk: int, stages: int) -> int:
    """Where ``stage`` sits in the pipeline of ``chunk``: chunk 0 runs 0 -> pp-1, chunk 1 pp-1 -> 0."""
    return stage if chunk == 0 else stages - 1 - stage


def _next_stage(stage: int, chunk: int) -> int:
    return stage + 1 if chunk == 0 else stage - 1


def _halves(task: Task) -> list[tuple[str, int, int]]:
    """(FORWARD or BACKWARD, micro-batch, chunk) of the data-moving halves of a task."""
    if task.direction == FORWARD:
        return [(FORWARD, task.micro_batch, task.chunk)]
    if task.direction in (BACKWARD, BACKWARD_INPUT):
        return [(BACKWARD, task.micro_batch, task.chunk)]
    if task.direction == FORWARD_BACKWARD:
        assert task.paired is not None
        return [(FORWARD, task.micro_batch, task.chunk), (BACKWARD, *task.paired)]
    return []  # W: reads only what its Bi left on the stage


def inputs(stage: int, task: Task, stages: int) -> list[FlowKey]:
    """The activations and gradients ``task`` must receive before it starts."""
    needed = []
    for kind, mb, chunk in _halves(task):
        pos = position(stage, chunk, stages)
        if (kind == FORWARD and pos > 0) or (kind == BACKWARD and pos < stages - 1):
            needed.append((kind, mb, chunk, stage))
    return needed


def outputs(stage: int, task: Task, stages: int) -> list[tuple[int, FlowKey]]:
    """(destination stage, key) of what ``task`` sends when it ends."""
    sent = []
    for kind, mb, chunk in _halves(task):
        pos = position(stage, chunk, stages)
        if kind == FORWARD and pos < stages - 1:
            dst = _next_stage(stage, chunk)
        elif kind == BACKWARD and pos > 0:
            dst = stage - 1 if chunk == 0 else stage + 1
        else:
            continue
        sent.append((dst, (kind, mb, chunk, dst)))
    return sent


def split_backward(ops: tuple[Op, ...]) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """(input-gradient ops, weight-gradient ops) of a full backward op list, indices remapped."""
    keep = [i for i, op in enumerate(ops) if not op.name.endswith(WGRAD_SUFFIX)]
    new_index = {old: new for new, old in enumerate(keep)}
    input_ops = []
    for i in keep:
        op = ops[i]
        assert all(dep in new_index for dep in op.deps), f"{op.name} depends on a weight gradient"
        input_ops.append(replace(op, deps=tuple(new_index[dep] for dep in op.deps)))
    weight_ops = tuple(replace(op, deps=(), stream=COMPUTE) for op in ops if op.name.endswith(WGRAD_SUFFIX))
    return tuple(input_ops), weight_ops


def pair(first: tuple[Op, ...], second: tuple[Op, ...]) -> tuple[tuple[Op, ...], tuple[int, ...]]:
    """Merge two op lists into one, interleaved in proportion (the host issues them alternately),
    with each op's lane (0 = ``first``, 1 = ``second``); each list keeps its own order and deps."""
    order = sorted(
        [(i / len(first), 0, i) for i in range(len(first))] + [(j / len(second), 1, j) for j in range(len(second))]
    )
    new_index = {(lane, i): k for k, (_, lane, i) in enumerate(order)}
    merged = []
    for _, lane, i in order:
        op = (first, second)[lane][i]
        merged.append(replace(op, deps=tuple(new_index[(lane, dep)] for dep in op.deps)))
    return tuple(merged), tuple(lane for _, lane, _ in order)


def is_dualpipe_kind(direction: str) -> bool:
    """Whether a task kind exists only in split/paired schedules (Bi, W, F&B)."""
    return direction in (BACKWARD_INPUT, WEIGHT, FORWARD_BACKWARD)
