"""Split and paired task op lists (DeepSeek-V3 report Sec. 3.2.1; deepseek-ai/DualPipe).

A split backward is the full backward's op list without its weight-gradient GEMMs (ops of role
WEIGHT_GRAD: Bi) and those GEMMs alone (W); nothing in a backward depends on a weight gradient, so the split is
exact. An F&B task runs a forward and a full backward op list concurrently, each on its own lane
(compute and comm streams) with the GPU's compute shared between the lanes (simulator.tasks), so one
lane's communication hides behind the other's compute, as DeepSeek's overlapped_forward_backward does.
A delayed-wgrad backward issues each layer's weight gradients where Megatron-Core's --delay-wgrad-compute
puts them, so they fill the time the layer's all-to-alls are in flight.
"""

from __future__ import annotations

from dataclasses import replace

from workloads.ops import COMPUTE, Group, Module, Op, Role


def split_backward(ops: tuple[Op, ...]) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """(input-gradient ops, weight-gradient ops) of a full backward op list, indices remapped."""
    keep = [i for i, op in enumerate(ops) if op.role != Role.WEIGHT_GRAD]
    new_index = {old: new for new, old in enumerate(keep)}
    input_ops = []
    for i in keep:
        op = ops[i]
        assert all(dep in new_index for dep in op.deps), f"{op.name} depends on a weight gradient"
        input_ops.append(replace(op, deps=tuple(new_index[dep] for dep in op.deps)))
    weight_ops = tuple(replace(op, deps=(), stream=COMPUTE) for op in ops if op.role == Role.WEIGHT_GRAD)
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


def delay_weight_grads(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    """A full backward op list with each layer's weight gradients issued as Megatron-Core's combined 1F1B
    with --delay-wgrad-compute issues them (TransformerLayerSchedulePlan.run, megatron/core/models/common/
    model_chunk_schedule_plan.py): the experts' (the "mlp" node, between the combine's and the dispatch's
    backward) right after the dispatch backward is issued, so they run while it is in flight; the rest
    of the layer's (attention, router, shared experts: pre_dispatch_computation.backward_dw) after the
    layer's last input gradient, beside the next layer's combine backward. Nothing waits for a weight
    gradient, so only the compute stream's order changes. A layer without both all-to-alls keeps all its
    weight gradients to its end. NOTE: the shared experts' weight gradients go to the end with the attention's,
    but their input gradients stay on the dispatch's path (workloads.moe runs the shared experts beside the
    dispatch, where Megatron-Core runs them in pre_dispatch_computation)."""
    order: list[int] = []
    start = 0
    while start < len(ops):
        end = start
        while end < len(ops) and ops[end].layer == ops[start].layer:
            end += 1
        order += _delayed_layer(ops, range(start, end))
        start = end
    new_index = {old: new for new, old in enumerate(order)}
    delayed = []
    for old in order:
        op = ops[old]
        assert all(ops[dep].role != Role.WEIGHT_GRAD for dep in op.deps), f"{op.name} depends on a weight gradient"
        delayed.append(replace(op, deps=tuple(new_index[dep] for dep in op.deps)))
    return tuple(delayed)


def _delayed_layer(ops: tuple[Op, ...], layer: range) -> list[int]:
    """Program order of one layer's backward ops with its weight gradients delayed (delay_weight_grads)."""
    ep = [i for i in layer if ops[i].is_comm and ops[i].group == Group.EP and ops[i].role == Role.INPUT_GRAD]
    combine, dispatch = (ep[0], ep[-1]) if len(ep) >= 2 else (layer.stop, layer.stop)
    grads = [i for i in layer if ops[i].role != Role.WEIGHT_GRAD]
    wgrads = [i for i in layer if ops[i].role == Role.WEIGHT_GRAD]
    experts = [i for i in wgrads if combine < i < dispatch and ops[i].module != Module.SHARED_EXPERTS]
    rest = [i for i in wgrads if i not in experts]
    return [i for i in grads if i <= dispatch] + experts + [i for i in grads if i > dispatch] + rest
