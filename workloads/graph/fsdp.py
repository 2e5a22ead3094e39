"""FSDP / ZeRO-2 and ZeRO-3 as the implementations run them: communication per unit (a transformer layer), inside
the task's op list, on streams of its own.

Megatron FSDP's unit is the transformer layer (``fsdp_unit_modules`` default TransformerLayer / MoETransformerLayer,
megatron/core/distributed/fsdp/mcore_fsdp_adapter.py at NVIDIA/Megatron-LM d98e8a64dd: "'optim': Reduce-scatter
communication groups on the final microbatch. 'optim_grads': Additionally, RS communication groups on all
microbatches. 'optim_grads_params': RS & AG communication groups on all microbatches"). So, per micro-batch:

- ZeRO-3 (optim_grads_params, PyTorch FSDP2): each unit's weights are all-gathered before its forward and again
  before its backward (docs/user-guide/features/megatron_fsdp.md, "Model parameters are all-gathered (AG) ...
  pre-forward and pre-backward"; with recomputation the backward's gather serves the recomputed forward too,
  "parameters are resharded during Post-Backward"), on an all-gather stream of its own;
- ZeRO-2 and up: each unit's gradients are reduce-scattered after its backward, on a reduce-scatter stream of its
  own ("Gradient reduce-scatter is overlapped with backward compute and accumulated during every backward pass";
  "All collectives associated with ... {AG, RS} are scheduled and tracked with separate streams and
  communicators").

Prefetch, as a dependency: two units' weights may be gathered at a time (Megatron FSDP's double buffer, "no more than
2 FSDP units are computed or communicated concurrently", megatron_fsdp.md; FSDP2's forward "allows two all-gather
output tensors to be alive at once" and its backward prefetches "based on the reverse post-forward order",
pytorch/pytorch#128884), so the all-gather of a task's k-th unit waits for the compute of its (k-2)-th unit to end,
and the k-th unit's compute waits for its all-gather. The first all-gather of a task has nothing to hide behind
but the embedding or the head ("The 1st all-gather will not be able to overlap with anything", PyTorch FSDP Notes,
"FSDP Prefetch Nuances"): a task's units start gathering at its start, none earlier. Gradients: two units' worth of
unsharded gradients ("To overlap gradient reduce-scatter with wgrad computation, at least two FSDP units worth of
un-sharded gradient memory is required"), so the weight gradients of the k-th unit wait for the reduce-scatter of
the (k-2)-th. The embedding, the head and MTP modules are not units: their weights and gradients keep the step's
one all-gather and reduce-scatter (StepWorkload.step_sync_groups; Megatron FSDP: "Non-unit modules remain
persistently un-sharded"; MTP's transformer layer, a unit in Megatron FSDP, is counted with them here).

Bytes per GPU: a ring all-gather or reduce-scatter of P parameters over d GPUs sends (d - 1) / d of them, as the
step's DP sync counts them (simulator.engine.engine.Engine.dp_wire_bytes); on the NIC where the DP group leaves the
node, else on NVLink. Where k members of the ring share a node, one GPU's NIC carries its share of them, as for the
step's DP sync (simulator/engine/dp_bytes.py ring_nic_share, applied where the costs are made: simulator/engine/timer.py
CostCache). The all-gather moves BF16 weights, or FP8 ones under --fp8-param-gather ("Conducts parameter
all-gather in FP8, reducing overhead by 50%", megatron/core/transformer/moe/README.md at d98e8a64dd) with, for
MXFP8, one E8M0 scale per 32 elements (its row-wise copy for forward and column-wise one for backward, each 1 byte,
megatron_fsdp.md "Quantized Parameters"); the reduce-scatter moves the main gradients' dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from topologies.errors import ConfigError
from workloads.ops import ALL_GATHER, BYTES_BF16, COLLECTIVE, COMPUTE, REDUCE_SCATTER, Group, Op, Role, evolved
from workloads.schedules.registry import per_unit_comm_runs
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import LayerKind, ModelSpec
from workloads.specs.precision import DTYPE_BYTES, GATHERED_WEIGHT_BYTES

FSDP_AG = "fsdp_ag"  # the all-gather stream (Megatron FSDP and FSDP2 each run one)
FSDP_RS = "fsdp_rs"  # the reduce-scatter stream
BUFFERED_UNITS = 2  # units whose weights (and, apart, whose gradients) exist whole at once: the double buffer


def gathers_per_unit(layout: LayoutSpec) -> bool:
    """Whether weights are all-gathered per unit, every micro-batch (ZeRO-3)."""
    return layout.zero_stage >= 3


def scatters_per_unit(layout: LayoutSpec) -> bool:
    """Whether gradients are reduce-scattered per unit, every micro-batch (ZeRO-2 and up)."""
    return layout.zero_stage >= 2


def param_gather_bytes(layout: LayoutSpec) -> float:
    """Bytes per parameter of a weight's all-gather: BF16, or the run's FP8 / FP4 with its scales under
    fp8_param_gather (--fp8-param-gather, --fp4-param-gather; workloads.specs.precision.GATHERED_WEIGHT_BYTES)."""
    if not layout.fp8_param_gather:
        return float(BYTES_BF16)
    return GATHERED_WEIGHT_BYTES[layout.fp8_recipe or "delayed"]


def grad_scatter_bytes(layout: LayoutSpec) -> float:
    """Bytes per parameter of a unit's reduce-scatter: the main gradients' dtype (BF16 under MegaScale-MoE's BF16
    gradient all-to-all, grad_sync "bf16-a2a", Sec. 5)."""
    return float(BYTES_BF16 if layout.grad_sync == "bf16-a2a" else DTYPE_BYTES[layout.main_grads_dtype])


def unit_params(model: ModelSpec, layout: LayoutSpec, kind: LayerKind) -> tuple[float, float]:
    """(dense, expert) parameters per GPU of one unit whose gradients cross the DP group, counted as
    StepWorkload.stage_param_groups counts them: TP / SP-split weights 1/n, router and norms whole, routed experts
    over EP x ETP (or n under TP experts)."""
    p = model.layer_parts(kind.dense, kind.block)
    n = layout.intra_size
    experts = p.experts / (layout.ep_degree * layout.etp if layout.ffn == "ep" else n)
    return (p.attention + p.dense_ffn + p.shared) / n + p.replicated, experts


@dataclass(frozen=True)
class UnitComm:
    """How one unit's weights and gradients cross their groups: dense ones over DP x CP, routed experts over
    expert DP; per GPU, the bytes each all-gather and reduce-scatter sends, on the NIC or on NVLink."""

    dense_dp: int
    expert_dp: int
    across_nodes: bool
    gather_bytes_per_param: float  # 0: no per-unit all-gather
    scatter_bytes_per_param: float  # 0: no per-unit reduce-scatter

    def _ops(self, kind: str, params: tuple[float, float], layer: int, role: Role, deps: tuple[int, ...]) -> list[Op]:
        per_param = self.gather_bytes_per_param if kind == ALL_GATHER else self.scatter_bytes_per_param
        stream = FSDP_AG if kind == ALL_GATHER else FSDP_RS
        out = []
        for group, size, count in ((Group.DP, self.dense_dp, params[0]), (Group.EDP, self.expert_dp, params[1])):
            if size <= 1 or count <= 0 or per_param <= 0:
                continue
            wire = count * per_param * (size - 1) / size
            name = f"fsdp.{'ag' if kind == ALL_GATHER else 'rs'}.{group}"
            out.append(
                Op(
                    name,
                    COLLECTIVE,
                    stream,
                    deps,
                    role,
                    layer,
                    collective=kind,
                    group=group,
                    group_size=size,
                    comm_bytes=0.0 if self.across_nodes else wire,
                    nic_bytes=wire if self.across_nodes else 0.0,
                )
            )
        return out


def with_unit_comm(
    ops: tuple[Op, ...] | list[Op], units: dict[int, tuple[float, float]], comm: UnitComm, backward: bool
) -> tuple[Op, ...]:
    """``ops`` (a forward or a backward of a chunk) with each unit's all-gather before it and, in backward, its
    reduce-scatter after it. ``units``: the layer indices of the chunk's units and their (dense, expert)
    parameters per GPU; other layers (embedding -1, head, MTP) get nothing."""
    ops = list(ops)
    order: list[int] = []  # units in the order the task runs them
    first: dict[int, int] = {}
    last_compute: dict[int, int] = {}
    first_wgrad: dict[int, int] = {}
    for index, op in enumerate(ops):
        if op.layer not in units:
            continue
        if op.layer not in first:
            first[op.layer] = index
            order.append(op.layer)
        if op.stream == COMPUTE:
            last_compute[op.layer] = index
        if op.role == Role.WEIGHT_GRAD and op.layer not in first_wgrad:
            first_wgrad[op.layer] = index
    gather = comm.gather_bytes_per_param > 0
    scatter = backward and comm.scatter_bytes_per_param > 0
    role = Role.INPUT_GRAD if backward else Role.FORWARD
    # what to insert before / after an old index, as (op, deps in old indices or in inserted ops)
    before: dict[int, list] = {}
    after: dict[int, list] = {}
    gathered: dict[int, list] = {}  # unit -> its all-gather entries
    scattered: dict[int, list] = {}
    for k, layer in enumerate(order):
        if gather:
            prefetch = ((), 0) if k < BUFFERED_UNITS else ((last_compute[order[k - BUFFERED_UNITS]],), 1)
            entries = [[op, prefetch] for op in comm._ops(ALL_GATHER, units[layer], layer, role, ())]
            gathered[layer] = entries
            if k < BUFFERED_UNITS:
                before.setdefault(first[order[0]], []).extend(entries)
            else:
                after.setdefault(last_compute[order[k - BUFFERED_UNITS]], []).extend(entries)
        if scatter:
            entries = [
                [op, ((last_compute[layer],), 1)]
                for op in comm._ops(REDUCE_SCATTER, units[layer], layer, Role.WEIGHT_GRAD, ())
            ]
            scattered[layer] = entries
            after.setdefault(max(i for i, op in enumerate(ops) if op.layer == layer), []).extend(entries)
    if not gathered and not scattered:
        return tuple(ops)
    # Build the new list: old index -> new index, inserted entries get their new index as they are placed.
    out: list[Op] = []
    new_index: dict[int, int] = {}
    placed: dict[int, int] = {}  # id(entry) -> new index

    def place(entries: list) -> None:
        for entry in entries:
            op, (deps, _) = entry
            out.append(evolved(op, deps=tuple(new_index[d] for d in deps)))
            placed[id(entry)] = len(out) - 1

    for index, op in enumerate(ops):
        place(before.get(index, []))
        extra: tuple[int, ...] = ()
        if index == first.get(op.layer, -1) and op.layer in gathered:
            extra += tuple(placed[id(entry)] for entry in gathered[op.layer])
        if index == first_wgrad.get(op.layer, -1) and scattered:
            k = order.index(op.layer)
            if k >= BUFFERED_UNITS:
                extra += tuple(placed[id(entry)] for entry in scattered[order[k - BUFFERED_UNITS]])
        deps = tuple(new_index[d] for d in op.deps) + extra
        out.append(evolved(op, deps=deps))
        new_index[index] = len(out) - 1
        place(after.get(index, []))
    return tuple(out)


def unit_comm(
    model: ModelSpec, layout: LayoutSpec, dense_dp: int, expert_dp: int, across_nodes: bool
) -> UnitComm | None:
    """The per-unit communication of a layout, or None where it has none (ZeRO-0/1, or no DP)."""
    if not scatters_per_unit(layout) or (dense_dp <= 1 and expert_dp <= 1):
        return None
    return UnitComm(
        dense_dp,
        expert_dp,
        across_nodes,
        param_gather_bytes(layout) if gathers_per_unit(layout) else 0.0,
        grad_scatter_bytes(layout),
    )


def check_unit_schedule(layout: LayoutSpec, dp_groups: int) -> None:
    """Per-unit ZeRO-2/3 communication is inserted into whole forward and backward tasks: refuse the schedules
    whose tasks split or pair them (ZB / DualPipe's W passes, F&B pairs, Megatron-Core's combined 1F1B)."""
    if not scatters_per_unit(layout) or dp_groups <= 1:
        return
    if not per_unit_comm_runs(layout.schedule, layout.ep_overlap):
        what = "--overlap-moe-expert-parallel-comm" if layout.ep_overlap else f"schedule {layout.schedule!r}"
        raise ConfigError(
            "layout.zero_stage",
            f"FSDP / ZeRO-{layout.zero_stage}'s per-layer all-gathers and reduce-scatters are simulated with the "
            f"1F1B and interleaved schedules, not with {what}; use --set zero_stage=1 (distributed optimizer, "
            "Megatron's --use-distributed-optimizer)",
        )


def dp_group_in_node(pp: int, dp: int, n: int, cp: int, experts: int, gpus_per_node: int) -> bool:
    """Whether every stage's DP group (its replicas and CP ranks) sits in one node, in the GPU numbering of
    simulator/engine/ranks.py (GPU = ((d // k) pp + s) block + (d % k) group + j; ``experts`` = EP x ETP); the
    folded placement's DP ring test, for all stages (tests/unit/test_fsdp_timing.py holds the two equal)."""
    group = n * cp
    block = group if group >= gpus_per_node else math.lcm(group, min(experts, gpus_per_node))
    k = block // group

    def gpu(replica: int, stage: int, rank: int) -> int:
        return ((replica // k) * pp + stage) * block + (replica % k) * group + rank

    for stage in range(pp):
        first, last = gpu(0, stage, 0), gpu(dp - 1, stage, (cp - 1) * n)
        if first // gpus_per_node != last // gpus_per_node:
            return False
    return True
