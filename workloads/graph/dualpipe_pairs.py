"""Split and paired task op lists (DeepSeek-V3 report Sec. 3.2.1; deepseek-ai/DualPipe).

A split backward is the full backward's op list without its weight-gradient GEMMs (ops of role
WEIGHT_GRAD: Bi) and those GEMMs alone (W); nothing in a backward depends on a weight gradient, so the split is
exact. An F&B task runs a forward and a full backward op list concurrently, each on its own lane
(compute and comm streams) with the GPU's compute shared between the lanes (simulator.streams.tasks), so one
lane's communication hides behind the other's compute, as DeepSeek's overlapped_forward_backward does.
(Megatron-Core's combined 1F1B F&B is workloads/graph/combined_1f1b.py.)
"""

from __future__ import annotations

from workloads.ops import COMPUTE, Op, Role, evolved


def split_backward(ops: tuple[Op, ...]) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """(input-gradient ops, weight-gradient ops) of a full backward op list, indices remapped."""
    keep = [i for i, op in enumerate(ops) if op.role != Role.WEIGHT_GRAD]
    new_index = {old: new for new, old in enumerate(keep)}
    input_ops = []
    for i in keep:
        op = ops[i]
        assert all(dep in new_index for dep in op.deps), f"{op.name} depends on a weight gradient"
        input_ops.append(evolved(op, deps=tuple(new_index[dep] for dep in op.deps)))
    weight_ops = tuple(evolved(op, deps=(), stream=COMPUTE) for op in ops if op.role == Role.WEIGHT_GRAD)
    return tuple(input_ops), weight_ops


def pair(first: tuple[Op, ...], second: tuple[Op, ...]) -> tuple[tuple[Op, ...], tuple[int, ...]]:
    """Merge two op lists into one, interleaved in proportion (the host issues them alternately),
    with each op's lane (0 = ``first``, 1 = ``second``); each list keeps its own order and deps."""
    order = sorted(
        [(i / len(first), 0, i) for i in range(len(first))] + [(j / len(second), 1, j) for j in range(len(second))]
    )
    return merged((first, second), [(lane, i) for _, lane, i in order]), tuple(lane for _, lane, _ in order)


def merged(
    lanes: tuple[tuple[Op, ...], ...],
    order: list[tuple[int, int]],
    deps: dict[tuple[int, int], tuple[int, ...]] | None = None,
    streams: dict[tuple[int, int], str] | None = None,
) -> tuple[Op, ...]:
    """The ops of ``lanes`` as one op list in ``order`` ((lane, index) of each), each op's deps (its own, or
    ``deps``' for it: indices in its lane) remapped to the list, on its own stream or ``streams``' for it."""
    deps, streams = deps or {}, streams or {}
    new_index = {item: k for k, item in enumerate(order)}
    out = []
    for lane, i in order:
        op = lanes[lane][i]
        old = deps.get((lane, i), op.deps)
        out.append(evolved(op, stream=streams.get((lane, i), op.stream), deps=tuple(new_index[(lane, d)] for d in old)))
    return tuple(out)
