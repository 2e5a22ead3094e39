"""Megatron-Core's combined 1F1B F&B task (--overlap-moe-expert-parallel-comm): one op list, layer by layer.

Megatron-Core runs a steady-state forward chunk and another micro-batch's backward chunk on two CUDA streams,
not as two independent programs: ``TransformerModelChunkSchedulePlan.run`` pairs forward layer i with the
backward's next layer (``pop_layer``) and ``TransformerLayerSchedulePlan.run`` issues each pair as

    comm stream:    combine_bwd        | dispatch_fwd -> dispatch_bwd         | combine_fwd
    compute stream: pre_dispatch_fwd   | mlp_bwd -> mlp_bwd_dw -> mlp_fwd      | pre_dispatch_bwd -> its dw

(megatron/core/models/common/model_chunk_schedule_plan.py, NVIDIA/Megatron-LM d98e8a64). Both micro-batches'
all-to-alls go on the one ``get_comm_stream()`` (megatron/core/pipeline_parallel/utils.py), so they run one
after another and each hides behind the other micro-batch's compute; the combine node also runs the
unpermute and the MLP residual on that stream (fine_grained_callables.py ``submodule_combine_forward``), where
they compete for the SMs with the other micro-batch's compute (simulator.streams.tasks.run_task: the op list's
kernels then take turns on the GPU).
Before the layers come the forward's embedding and the backward's head (post_process.backward); after them
the backward's and then the forward's unpaired layers, the forward's head and the backward's embedding.

Here the forward layer is cut at its EP dispatch and combine all-to-alls into pre-dispatch (A: with the
dispatch preprocess and its metadata collectives, such as HybridEP's routing-map all-gather, which Megatron-Core
runs in pre_dispatch_computation), dispatch (D: its all-to-alls, the alltoall dispatcher's rows' and then
probs'), experts (B) and combine (C: the all-to-all and the unpermute after it); the backward layer, in its own
order, into
combine backward (C': the unpermute's backward and the all-to-all), experts' backward (B'), dispatch
backward (D') and the rest (A'). A layer without exactly one dispatch and one combine (dense, embedding,
head, a fused or all-gather dispatch) is one piece. With ``delay_wgrad`` (--delay-wgrad-compute) B' and A'
issue their input gradients first and their weight gradients after (``mlp.backward_dw`` right before the
dispatch backward is issued, ``pre_dispatch_computation.backward_dw`` at the pair's end).
"""

from __future__ import annotations

from workloads.graph.dualpipe_pairs import merged
from workloads.ops import ALL_TO_ALL, ATTENTION, COLLECTIVE, MEMORY, Group, Module, Op, Role

EP_COMM = "ep_comm"  # Megatron-Core's one communication stream of the combined 1F1B


def _units(ops: tuple[Op, ...]) -> list[list[int]]:
    """Op indices grouped by layer, in program order (each layer's ops are contiguous)."""
    units: list[list[int]] = []
    for index, op in enumerate(ops):
        if units and ops[units[-1][-1]].layer == op.layer:
            units[-1].append(index)
        else:
            units.append([index])
    return units


def _split(ops: tuple[Op, ...], unit: list[int], role: Role) -> tuple[list[int], ...] | None:
    """(before the first EP exchange, it, between, the second, after) or None if the unit is one piece. An exchange
    is a run of adjacent EP all-to-alls: the alltoall dispatcher's dispatch node sends the rows and then their probs
    in two NCCL calls (token_dispatch, NVIDIA/Megatron-LM@2a75ac12 token_dispatcher.py), both in moe_dispatch."""
    runs: list[list[int]] = []
    for position, i in enumerate(unit):
        if _is_ep(ops[i]) and ops[i].role == role:
            if runs and unit[position - 1] == runs[-1][-1]:
                runs[-1].append(i)
            else:
                runs.append([i])
    if len(runs) != 2 or any(ops[i].kind != COLLECTIVE for run in runs for i in run):
        return None
    first, second = unit.index(runs[0][0]), unit.index(runs[1][0])
    first_end, second_end = first + len(runs[0]), second + len(runs[1])
    return unit[:first], unit[first:first_end], unit[first_end:second], unit[second:second_end], unit[second_end:]


def _is_layer(ops: tuple[Op, ...], unit: list[int]) -> bool:
    """A transformer layer (an attention or an EP all-to-all in it), not the embedding, the head or an MTP input."""
    return ops[unit[0]].layer >= 0 and any(ops[i].kind == ATTENTION or _is_ep(ops[i]) for i in unit)


def _is_ep(op: Op) -> bool:
    """An EP token exchange (the dispatch or the combine): not the metadata collectives of the dispatch preprocess
    (HybridEP's routing-map all-gather), which run in pre_dispatch_computation on the compute stream."""
    return op.group == Group.EP and op.is_comm and op.collective == ALL_TO_ALL


def _grads_then_wgrads(ops: tuple[Op, ...], indices: list[int], delay: bool) -> tuple[list[int], list[int]]:
    if not delay:
        return indices, []
    return [i for i in indices if ops[i].role != Role.WEIGHT_GRAD], [
        i for i in indices if ops[i].role == Role.WEIGHT_GRAD
    ]


def _pair_layer(f_ops, f_unit, b_ops, b_unit, delay: bool, deps: dict) -> tuple[list[tuple[int, int]], set]:
    """Issue order of one TransformerLayerSchedulePlan.run(f, b) as (lane, index) and what goes on EP_COMM;
    ``deps`` gets the ops whose dependencies change (lane, index) -> deps."""
    f = _split(f_ops, f_unit, Role.FORWARD) if f_unit else None
    b = _split(b_ops, b_unit, Role.INPUT_GRAD) if b_unit else None
    on_comm: set[tuple[int, int]] = set()
    F = lambda indices: [(0, i) for i in indices]
    B = lambda indices: [(1, i) for i in indices]
    if f is not None:
        f_pre, f_dispatch, f_mlp, f_combine = f[0], f[1], f[2], f[3] + f[4]
        # the shared experts run in pre_dispatch_computation (shared_experts_compute, no shared-expert overlap):
        # they take the dispatch's inputs, and what waited for them waits for the dispatch too
        shared = [i for i in f_mlp if f_ops[i].module == Module.SHARED_EXPERTS]
        if shared:
            f_pre, f_mlp = f_pre + shared, [i for i in f_mlp if i not in shared]
            deps[(0, shared[0])] = f_ops[f_dispatch[0]].deps
            for i in f_mlp:
                if shared[-1] in f_ops[i].deps:
                    deps[(0, i)] = (*f_ops[i].deps, f_dispatch[0])
        on_comm |= {(0, i) for i in f_dispatch + f_combine if _comm_stream_op(f_ops[i])}
        # the combine node runs the MLP's residual add after the unpermute, on the comm stream too
        # (fine_grained_callables.py submodule_combine_forward, lines 205-225 at d98e8a64)
        on_comm |= {(0, i) for i in f[4] if f_ops[i].kind == MEMORY and f_ops[i].role != Role.RECOMPUTE}
    if b is not None:
        b_combine, b_mlp, b_dispatch, b_pre = b[0] + b[1], b[2], b[3], b[4]
        on_comm |= {(1, i) for i in b_combine + b_dispatch if _comm_stream_op(b_ops[i])}
        mlp_dgrad, mlp_dw = _grads_then_wgrads(b_ops, b_mlp, delay)
        if not delay:  # mlp.backward runs the experts' wgrads too: the dispatch node waits for its event after them
            wgrads = tuple(i for i in b_mlp if b_ops[i].role == Role.WEIGHT_GRAD)
            deps[(1, b_dispatch[0])] = (*b_ops[b_dispatch[0]].deps, *wgrads)
        pre_dgrad, pre_dw = _grads_then_wgrads(b_ops, b_pre, delay)
    if f is not None and b is not None:
        order = (
            (B(b_combine) + F(f_pre) + B(mlp_dgrad) + F(f_dispatch) + B(mlp_dw) + B(b_dispatch) + F(f_mlp))
            + F(f_combine)
            + B(pre_dgrad)
            + B(pre_dw)
        )
    elif f is not None:  # the backward layer is one piece: it runs where the forward's experts wait on dispatch
        order = F(f_pre) + F(f_dispatch) + B(b_unit or []) + F(f_mlp) + F(f_combine)
    elif b is not None:
        order = B(b_combine) + F(f_unit or []) + B(mlp_dgrad) + B(mlp_dw) + B(b_dispatch) + B(pre_dgrad) + B(pre_dw)
    else:
        order = F(f_unit or []) + B(b_unit or [])
    return order, on_comm


def _comm_stream_op(op: Op) -> bool:
    """What the dispatch and combine nodes run on the comm stream: the all-to-all, the unpermute (and residual)."""
    unpermute = op.kind == MEMORY and op.module == Module.MOE and op.role != Role.RECOMPUTE
    return (op.kind == COLLECTIVE and op.group == Group.EP) or unpermute


def pair(forward: tuple[Op, ...], backward: tuple[Op, ...], delay_wgrad: bool) -> tuple[Op, ...]:
    """The combined 1F1B F&B op list of a forward chunk and a (full, undelayed) backward chunk of another
    micro-batch: both on one compute stream and one EP_COMM stream, issued in Megatron-Core's order."""
    f_units, b_units = _units(forward), _units(backward)
    f_layer_at = [k for k, unit in enumerate(f_units) if _is_layer(forward, unit)]
    b_layer_at = [k for k, unit in enumerate(b_units) if _is_layer(backward, unit)]
    f_first, f_last = (f_layer_at[0], f_layer_at[-1]) if f_layer_at else (len(f_units), len(f_units) - 1)
    b_first, b_last = (b_layer_at[0], b_layer_at[-1]) if b_layer_at else (len(b_units), len(b_units) - 1)
    f_layers, b_layers = f_units[f_first : f_last + 1], b_units[b_first : b_last + 1]
    order: list[tuple[int, int]] = [(0, i) for unit in f_units[:f_first] for i in unit]  # embedding forward
    order += [(1, i) for unit in b_units[:b_first] for i in unit]  # head backward (post_process.backward)
    on_comm: set[tuple[int, int]] = set()
    deps: dict[tuple[int, int], tuple[int, ...]] = {}
    overlapped = min(len(f_layers), len(b_layers))
    pairs = [(f_layers[k], b_layers[k]) for k in range(overlapped)]
    pairs += [(None, unit) for unit in b_layers[overlapped:]] + [(unit, None) for unit in f_layers[overlapped:]]
    for f_unit, b_unit in pairs:
        layer_order, layer_comm = _pair_layer(forward, f_unit, backward, b_unit, delay_wgrad, deps)
        order += layer_order
        on_comm |= layer_comm
    order += [(0, i) for unit in f_units[f_last + 1 :] for i in unit]  # head forward (post_process)
    order += [(1, i) for unit in b_units[b_last + 1 :] for i in unit]  # embedding backward (pre_process)
    assert sorted(order) == sorted([(0, i) for i in range(len(forward))] + [(1, i) for i in range(len(backward))])
    return merged((forward, backward), order, deps, dict.fromkeys(on_comm, EP_COMM))
