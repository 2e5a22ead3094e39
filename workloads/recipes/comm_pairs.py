"""The collective pairs around a block: Megatron TP's gather / scatter (or all-reduces) and Ulysses SP's
all-to-alls. The attention, MLA and FFN recipes all wrap their blocks in them."""

from __future__ import annotations

from workloads.ops import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER, Carries, Group, Module, Step, comm_step
from workloads.specs.layouts import LayoutSpec


def megatron_tp(layout: LayoutSpec) -> bool:
    """Whether the layout's TP layers are Megatron-Core's (with or without TE's userbuffers: tp_comm_overlap,
    tp_async_backward), whose vocabulary-parallel embedding and output layer exchange the micro-batch over the TP
    group (workloads/recipes/embedding.py, layers.head_recipe). MegaScale-MoE's own TP (the Table 5 baseline)
    does not publish its embedding's or head's exchange: none is charged there."""
    return layout.attention == "tp" and layout.intra_size > 1 and (layout.tp_comm_overlap or layout.tp_async_backward)


def tp_pair(
    name: str, n: int, full_bytes: float, module: Module = Module.NONE, sequence_parallel: bool = True
) -> tuple[Step, Step]:
    """Megatron TP around a block (Eq. 1 / Eq. 4). With sequence parallelism: AG in, RS out. Without: identity
    in with an all-reduce of its gradient in backward, all-reduce out with nothing in backward
    (megatron/core/tensor_parallel/mappings.py copy_to_ / reduce_from_tensor_model_parallel_region); an
    all-reduce moves the ring's 2 (n-1)/n of the tensor per GPU, nccl-tests' bus bytes."""
    egress = full_bytes * (n - 1) / n
    if not sequence_parallel:
        into = comm_step(f"tp_ar_{name}_in", ALL_REDUCE, Group.TP, 2 * egress, backward_only=True, module=module)
        out = comm_step(f"tp_ar_{name}", ALL_REDUCE, Group.TP, 2 * egress, bwd_kernels=0, module=module)
        return into, out
    gather = comm_step(
        f"tp_ag_{name}",
        ALL_GATHER,
        Group.TP,
        comm_bytes=egress,
        fuse="next",
        sar_recompute=True,
        carries=Carries.INTO_GEMM,
        module=module,
    )
    scatter = comm_step(
        f"tp_rs_{name}",
        REDUCE_SCATTER,
        Group.TP,
        comm_bytes=egress,
        fuse="prev",
        carries=Carries.OUT_OF_GEMM,
        module=module,
    )
    return gather, scatter


def ulysses_pair(n: int, qkv_bytes: float, out_bytes: float) -> tuple[Step, Step]:
    """Ulysses SP around core attention (MegaScale-MoE Eq. 2): all-to-all Q, K, V (``qkv_bytes`` per GPU)
    to head shards, and the output (``out_bytes``) back to sequence shards; (n-1)/n of each leaves the GPU."""
    return (
        comm_step("sp_a2a_qkv", ALL_TO_ALL, Group.SP, comm_bytes=qkv_bytes * (n - 1) / n, fuse="prev"),
        comm_step("sp_a2a_out", ALL_TO_ALL, Group.SP, comm_bytes=out_bytes * (n - 1) / n, fuse="next"),
    )
