"""Forward and backward op lists of one pipeline task (a chunk of layers for one micro-batch).

Backward is derived from the forward recipe: GEMMs split into input- and weight-gradient GEMMs, collectives are
transposed (all-gather <-> reduce-scatter), attention backward costs 2.5x forward (it recomputes QK^T). With inter-op
overlap, communication runs on the comm stream and the weight-gradient GEMM is issued after it, hiding the collective
(MegaScale-MoE Sec. 4.1); with intra-op overlap each collective is fused with its adjacent GEMM.

With Transformer Engine's userbuffers (layout.tp_comm_overlap, Megatron's --tp-comm-overlap) only the TP collectives
around TE's linear layers overlap, as TE runs them (transformer_engine/pytorch/module/layernorm_linear.py and linear.py
``backward``; the methods Megatron-Bridge configures per layer in src/megatron/bridge/training/comm_overlap.py
TransformerLayerTPOverlapCfg): in forward the all-gather chunked into the QKV / FC1 GEMM and the reduce-scatter out of
the proj / FC2 GEMM (qkv_fprop, fc1_fprop, proj_fprop, fc2_fprop: ring exchange, one chunk per TP rank); in backward
the all-gather of the output gradient chunked into the proj / FC2 dgrad (proj_dgrad, fc2_dgrad), and for the
column-parallel QKV / FC1 two bulk overlaps: the sequence-parallel input, saved as the local shard, re-gathered beside
the dgrad GEMM (qkv_dgrad, fc1_dgrad: ``ln_out_needs_gather``) and the dgrad reduce-scattered beside the wgrad GEMM
(qkv_wgrad, fc1_wgrad). A bulk collective runs on the comm stream beside the GEMM it overlaps. Without userbuffers
(layout.tp_async_backward) Megatron-Core's and TE's TP layers still run the two bulk overlaps, as async NCCL calls.
Without sequence parallelism the TP blocks end in an all-reduce, and a column-parallel layer's backward all-reduces its
dgrad, under tp_async_backward asynchronously beside the wgrad GEMM.
"""

from __future__ import annotations

from collections.abc import Callable

from workloads.graph.main_grad import main_grad_add
from workloads.ops import (
    ATTENTION,
    COLLECTIVE,
    COMM,
    COMPUTE,
    FUSED,
    GEMM,
    HOST_SYNC,
    MEMORY,
    MEMORY_BACKWARD_FACTOR,
    SCAN_BACKWARD_FACTOR,
    SCAN_BACKWARD_TIME_RATIO,
    TRANSPOSE,
    Gemm,
    GraphPart,
    Group,
    Module,
    Op,
    Role,
    Step,
    evolved,
)
from workloads.recipes.fp8_quant import quantize_input
from workloads.specs.cuda_graphs import capture
from workloads.specs.layouts import LayoutSpec
from workloads.specs.peft import frozen_base
from workloads.specs.precision import DTYPE_BYTES, Fp8Recipe

ATTENTION_BACKWARD_FACTOR = 2.5  # FlashAttention-2 paper Sec. 4: backward = 2.5x forward FLOPs

LayerSteps = tuple[int, list[Step]]  # (layer index, forward recipe)


class _OpList:
    """Appends ops and hands out their indices."""

    def __init__(self, layout: LayoutSpec) -> None:
        self.ops: list[Op] = []
        self.comm_stream = COMM if layout.inter_op_overlap else COMPUTE
        self.fuse = layout.intra_op_overlap
        self.tp_overlap = layout.tp_comm_overlap
        self.tp_bulk = layout.tp_comm_overlap or layout.tp_async_backward  # TE's / Megatron's bulk overlaps
        self.group_size = layout.intra_size
        self.fp8_recipe = Fp8Recipe(layout.fp8_recipe)
        self.capture = capture(layout.cuda_graph_scope)
        # Weight gradients added into the main gradients in the wgrad GEMM's epilogue, or after it (main_grad.py)
        self.main_grad_bytes = DTYPE_BYTES[layout.main_grads_dtype]
        self.fused_accumulation = layout.grad_accumulation_fusion
        self.frozen = frozen_base(layout)  # LoRA: the base weights take no gradient (workloads/specs/peft.py)

    def graph(self, step: Step) -> GraphPart:
        """The CUDA graph that captures ``step``'s kernels under the layout's scopes (NONE: eager)."""
        return self.capture(step.graph)

    def fuses(self, step: Step) -> bool:
        """Whether a collective fuses into its GEMM: all under intra-op overlap, TE's TP ones under userbuffers."""
        return self.fuse or (self.tp_overlap and userbuffers(step))

    def add(self, op: Op) -> int:
        self.ops.append(op)
        return len(self.ops) - 1

    def compute(
        self,
        step: Step,
        layer: int,
        deps: tuple[int, ...],
        role: Role,
        *,
        gemm=None,
        name: str = "",
    ) -> int:
        counted = 0.0
        flops = 0.0
        kind = step.kind
        backward = role in (Role.INPUT_GRAD, Role.WEIGHT_GRAD)
        mem_bytes = step.mem_bytes * (MEMORY_BACKWARD_FACTOR if backward else 1.0)
        kernels = step.kernels
        if backward and step.bwd_mem_bytes is not None:
            mem_bytes = step.bwd_mem_bytes
        if backward and step.bwd_kernels is not None:
            kernels = step.bwd_kernels
        if role == Role.WEIGHT_GRAD and step.wgrad_kernels is not None:
            kernels = step.wgrad_kernels
        if kind == GEMM:
            flops = gemm.flops
            if role != Role.WEIGHT_GRAD:  # the wgrad reuses the column-wise copies (workloads/recipes/fp8_quant.py)
                deps = self.quantize(step, layer, deps, role, gemm, name or step.name)
        elif kind == ATTENTION:
            flops = step.flops * (ATTENTION_BACKWARD_FACTOR if backward else 1.0)
        scan_flops = step.scan_flops * (SCAN_BACKWARD_FACTOR if backward else 1.0)
        if role != Role.RECOMPUTE:
            counted = flops + scan_flops
        op = Op(
            name or step.name,
            kind,
            COMPUTE,
            deps,
            role,
            layer,
            gemm=gemm,
            flops=flops,
            model_flops=counted,
            attention_backward=backward and kind == ATTENTION,
            attention=step.attention,
            graph=self.graph(step),
            mem_bytes=mem_bytes,
            kernels=kernels,
            index_add_elements=step.bwd_index_add_elements if backward else 0.0,
            scan_state_bytes=step.scan_state_bytes * (SCAN_BACKWARD_TIME_RATIO if backward else 1.0),
            delta_rule=step.delta_rule,
            module=step.module,
        )
        if kind == ATTENTION and (step.comm_bytes or step.nic_bytes):  # ring attention: K/V blocks overlap
            scale = step.bwd_scale if backward else 1.0
            size = step.group_size or self.group_size
            op = evolved(
                op,
                kind=FUSED,
                collective=step.collective,
                group=step.group,
                group_size=size,
                comm_bytes=step.comm_bytes * scale,
                nic_bytes=step.nic_bytes * scale,
                tiles=size,
            )
        return self.add(op)

    def quantize(
        self, step: Step, layer: int, deps: tuple[int, ...], role: Role, gemm: Gemm, name: str
    ) -> tuple[int, ...]:
        """The FP8 quantization of a GEMM's input under the layout's recipe, before it; returns the GEMM's deps."""
        shards = step.grad_shards if role == Role.INPUT_GRAD else step.input_shards
        work = quantize_input(self.fp8_recipe, gemm, shards, step.norm_input and role != Role.INPUT_GRAD)
        if not work.kernels:
            return deps
        op = Op(
            f"{name}.quant",
            MEMORY,
            COMPUTE,
            deps,
            role,
            layer,
            mem_bytes=work.mem_bytes,
            kernels=work.kernels,
            transpose_bytes=work.transpose_bytes,
            transpose_kernels=work.transpose_kernels,
            module=step.module,
            graph=self.graph(step),
        )
        return (self.add(op),)

    def collective(
        self, step: Step, layer: int, deps: tuple[int, ...], role: Role, *, name: str = "", stream: str = ""
    ) -> int:
        backward = role == Role.INPUT_GRAD
        kind = TRANSPOSE[step.collective] if backward else step.collective
        scale = step.bwd_scale if backward else 1.0
        return self.add(
            Op(
                name or step.name,
                COLLECTIVE,
                stream or self.comm_stream,
                deps,
                role,
                layer,
                collective=kind,
                group=step.group,
                group_size=step.group_size or self.group_size,
                comm_bytes=step.comm_bytes * scale,
                nic_bytes=step.nic_bytes * scale,
                transport=step.transport,
                sms=step.sms,
                graph=self.graph(step),
            )
        )

    def bulk_backward(self, gather: Step, layer: int, dgrad: int) -> tuple[int, int]:
        """TE's bulk overlaps of a column-parallel layer's backward, after its dgrad GEMM at ``dgrad``: the
        re-gather of the saved input shard beside the dgrad (at the forward all-gather's bytes: TE gathers the
        quantized input under FP8) and the reduce-scatter of the dgrad, both on the comm stream. Returns
        (re-gather, reduce-scatter); the wgrad GEMM waits for the first, the layer below for the second."""
        common = {
            "group": gather.group,
            "group_size": gather.group_size or self.group_size,
            "graph": self.graph(gather),
        }
        regather = self.add(
            Op(
                f"{gather.name}.regather",
                COLLECTIVE,
                COMM,
                self.ops[dgrad].deps,
                Role.INPUT_GRAD,
                layer,
                collective=gather.collective,
                comm_bytes=gather.comm_bytes,
                nic_bytes=gather.nic_bytes,
                **common,
            )
        )
        scatter = self.add(
            Op(
                f"{gather.name}.bwd",
                COLLECTIVE,
                COMM,
                (dgrad,),
                Role.INPUT_GRAD,
                layer,
                collective=TRANSPOSE[gather.collective],
                comm_bytes=gather.comm_bytes * gather.bwd_scale,
                nic_bytes=gather.nic_bytes * gather.bwd_scale,
                **common,
            )
        )
        return regather, scatter

    def fuse_into(self, gemm_index: int, comm: Step, backward: bool) -> None:
        """Turn the GEMM op at ``gemm_index`` into a fused GEMM + collective op."""
        op = self.ops[gemm_index]
        kind = TRANSPOSE[comm.collective] if backward else comm.collective
        size = comm.group_size or self.group_size
        scale = comm.bwd_scale if backward else 1.0
        self.ops[gemm_index] = evolved(
            op,
            name=f"{op.name}+{comm.name}",
            kind=FUSED,
            collective=kind,
            group=comm.group,
            group_size=size,
            comm_bytes=comm.comm_bytes * scale,
            tiles=size,
            nic_bytes=comm.nic_bytes * scale,
            transport=comm.transport,
        )


def forward_ops(layers: list[LayerSteps], layout: LayoutSpec, *, recompute: bool = False) -> list[Op]:
    """The forward op chain of a chunk of layers."""
    ops = _OpList(layout)
    _emit_forward(ops, layers, (), recompute)
    return ops.ops


def _emit_forward(ops: _OpList, layers: list[LayerSteps], deps: tuple[int, ...], recompute: bool) -> int:
    role = Role.RECOMPUTE if recompute else Role.FORWARD
    last = deps[0] if deps else -1
    join: tuple[int, ...] = ()  # a comm-stream collective that overlapping compute ran beside
    for layer, steps in layers:
        pending_comm: Step | None = None
        for position, step in enumerate(steps):
            if step.backward_only:
                continue
            deps = (last,) if last >= 0 else ()
            if step.overlap_comm and not join and last >= 0 and ops.ops[last].stream == COMM:
                join, deps = (last,), ops.ops[last].deps  # run beside the collective, not after it
            elif join and not step.overlap_comm:
                deps, join = deps + join, ()
            if step.kind == COLLECTIVE:
                if ops.fuses(step) and step.fuse == "prev" and last >= 0 and ops.ops[last].kind == GEMM:
                    ops.fuse_into(last, step, backward=False)
                elif ops.fuses(step) and step.fuse == "next" and _next_compute_is_gemm(steps, position):
                    pending_comm = step
                else:
                    last = ops.collective(step, layer, deps, role)
                continue
            if step.kind == HOST_SYNC:
                last = ops.add(Op(step.name, HOST_SYNC, COMPUTE, deps, role, layer))
                continue
            last = ops.compute(
                step, layer, deps, role, gemm=step.gemm, name=f"{step.name}.recompute" if recompute else ""
            )
            if pending_comm is not None and step.kind == GEMM:
                ops.fuse_into(last, pending_comm, backward=False)
                pending_comm = None
            elif pending_comm is not None:  # nothing to fuse with: run it as a plain collective
                last = ops.collective(pending_comm, layer, (last,), role)
                pending_comm = None
    return last


def tp_linear(step: Step) -> bool:
    """Whether this collective is the TP all-gather / reduce-scatter around a column- or row-parallel linear layer
    (attention, dense MLP, the output layer), not the TP collectives of the MoE layer's token dispatcher and
    GroupedLinear experts (module "moe"). Megatron-Core runs such a layer's backward collectives beside its
    GEMMs (tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward, TE's bulk
    overlaps)."""
    return step.group == Group.TP and step.module != Module.MOE


def userbuffers(step: Step) -> bool:
    """Whether TE's userbuffers overlap this collective: the TP all-gather / reduce-scatter around TE's
    column- and row-parallel linear layers (attention, dense MLP), not the TP collectives of the MoE layer's
    token dispatcher and GroupedLinear experts (module "moe"), which TransformerLayerTPOverlapCfg does not name,
    nor Megatron-Core's own output layer (``te_linear`` False)."""
    return tp_linear(step) and step.te_linear


def _next_compute_is_gemm(steps: list[Step], position: int) -> bool:
    """Whether the first compute step after ``position`` is a GEMM (a collective fuses only into one)."""
    following = [step for step in steps[position + 1 :] if step.kind != COLLECTIVE]
    return bool(following) and following[0].kind == GEMM


def backward_ops(layers: list[LayerSteps], layout: LayoutSpec, recompute_below: int | None = None) -> list[Op]:
    """The backward ops of a chunk of layers, last layer first, with recomputation per the layout.

    Full recomputation applies to transformer layers 0 .. recompute_below - 1 of the chunk (all of them
    by default), never to the embedding (-1) or the head: Megatron-LM's block method.
    """
    ops = _OpList(layout)
    grad = -1
    for layer, steps in reversed(layers):
        full = layout.recompute == "full" and 0 <= layer < (len(layers) if recompute_below is None else recompute_below)
        recomputed = _emit_recompute(ops, layer, steps, layout, grad, full)
        if full:
            grad = recomputed.get(-1, grad)
        grad = _emit_layer_backward(ops, layer, steps, grad, recomputed)
    return ops.ops


def _emit_recompute(
    ops: _OpList, layer: int, steps: list[Step], layout: LayoutSpec, grad: int, full: bool
) -> dict[int, int]:
    """Recompute ops at the start of a layer's backward; returns forward position -> op index."""
    if full:
        deps = (grad,) if grad >= 0 else ()
        last = _emit_forward(ops, [(layer, steps)], deps, recompute=True)
        return {-1: last}
    rerun = _reruns(layout)
    if rerun is None:
        return {}
    done: dict[int, int] = {}
    last = -1
    for position, step in enumerate(steps):
        if not rerun(step) or step.backward_only:
            continue
        deps = (last,) if last >= 0 else ()
        if step.kind == HOST_SYNC:  # the re-run dispatcher copies its token counts to the host again
            last = ops.add(Op(f"{step.name}.recompute", HOST_SYNC, COMPUTE, deps, Role.RECOMPUTE, layer))
        elif step.kind == COLLECTIVE:
            last = ops.collective(step, layer, deps, Role.RECOMPUTE, name=f"{step.name}.recompute")
        else:
            last = ops.compute(step, layer, deps, Role.RECOMPUTE, gemm=step.gemm, name=f"{step.name}.recompute")
        done[position] = last
    return done


def _reruns(layout: LayoutSpec) -> Callable[[Step], bool] | None:
    """Which forward steps partial recomputation re-runs at the start of a layer's backward: MegaScale-MoE's
    SAR steps (Sec. 4.1), or the steps of the Megatron-Core modules selective recomputation names
    (--recompute-granularity selective --recompute-modules); None without partial recomputation."""
    if layout.recompute == "sar" and layout.keep_dispatch:  # the received tokens are kept: nothing re-sent
        return lambda step: step.sar_recompute and not step.routed_copies
    if layout.recompute == "sar":
        return lambda step: step.sar_recompute
    if layout.recompute == "selective":
        modules = frozenset(Module(name) for name in layout.recompute_modules)
        return lambda step: step.module.rerun_by(modules)
    return None


def _emit_layer_backward(ops: _OpList, layer: int, steps: list[Step], grad: int, recomputed: dict[int, int]) -> int:
    deferred_wgrads: list[tuple[Step, tuple[int, ...]]] = []
    pending_comm: Step | None = None

    def flush() -> None:
        for step, deps in deferred_wgrads if not ops.frozen else ():
            wgrad = step.gemm.wgrad(ops.main_grad_bytes if ops.fused_accumulation else 0)
            if (step.wgrad_kernels or 0) > 1:  # launched per group: TE's multi-stream path (workloads/recipes/moe.py)
                wgrad = evolved(wgrad, multi_stream=True)
            done = ops.compute(step, layer, deps, Role.WEIGHT_GRAD, gemm=wgrad, name=f"{step.name}.wgrad")
            if not ops.fused_accumulation:  # written out, then added (workloads/graph/main_grad.py)
                ops.add(main_grad_add(wgrad, step, (done,), layer, ops.main_grad_bytes, ops.graph(step)))
        deferred_wgrads.clear()

    for position in range(len(steps) - 1, -1, -1):
        step = steps[position]
        deps = (grad,) if grad >= 0 else ()
        if position - 1 in recomputed:  # this step consumes a recomputed forward value
            deps += (recomputed[position - 1],)
        if step.kind == HOST_SYNC or step.bwd_kernels == 0 and step.kind == COLLECTIVE:
            continue
        if step.kind == COLLECTIVE:
            dgrad_before = grad >= 0 and ops.ops[grad].kind == GEMM
            if step.backward_only and ops.tp_bulk and dgrad_before:
                # Megatron-Core's async all-reduce of the dgrad, issued before the wgrad GEMM it runs beside
                # (tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward at d98e8a64dd)
                grad = ops.collective(step, layer, deps, Role.INPUT_GRAD, name=f"{step.name}.bwd", stream=COMM)
            elif ops.tp_bulk and tp_linear(step) and step.fuse == "next" and dgrad_before and not ops.fuse:
                regather, grad = ops.bulk_backward(step, layer, grad)
                deferred_wgrads[:] = [(wgrad, deps + (regather,)) for wgrad, deps in deferred_wgrads]
            elif ops.fuses(step) and step.fuse == "next" and dgrad_before:
                ops.fuse_into(grad, step, backward=True)  # fused with the dgrad just issued
            elif ops.fuses(step) and step.fuse == "prev":
                pending_comm = step  # fused with the next dgrad
            else:
                grad = ops.collective(step, layer, deps, Role.INPUT_GRAD, name=f"{step.name}.bwd")
            flush()
            continue
        flush()
        if step.kind == GEMM:
            grad = ops.compute(step, layer, deps, Role.INPUT_GRAD, gemm=step.gemm.dgrad(), name=f"{step.name}.dgrad")
            deferred_wgrads.append((step, deps))
            if pending_comm is not None:
                ops.fuse_into(grad, pending_comm, backward=True)
                pending_comm = None
        elif step.bwd_kernels != 0:  # 0: the step hands its output gradient through (no backward kernel)
            grad = ops.compute(step, layer, deps, Role.INPUT_GRAD, name=f"{step.name}.bwd")
            if pending_comm is not None:
                grad = ops.collective(pending_comm, layer, (grad,), Role.INPUT_GRAD, name=f"{pending_comm.name}.bwd")
                pending_comm = None
    flush()
    return grad
