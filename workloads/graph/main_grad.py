"""Weight gradients into the main gradients without gradient-accumulation fusion (layout grad_accumulation_fusion
False: Megatron's --no-gradient-accumulation-fusion, which Megatron FSDP with BF16 main gradients needs).

Fused (Megatron-LM's default, TE's fuse_wgrad_accumulation), the wgrad GEMM adds its product into the main gradient in
its epilogue (simulator.costs.kernels.accumulate_epilogue_s). Unfused, it writes its 16-bit product out, and the
parameter's backward hook adds it into the main gradient: ``param.main_grad.add_(param.grad.data)`` where the GEMM
did not (megatron/core/distributed/distributed_data_parallel.py _make_backward_post_hook at NVIDIA/Megatron-LM
d98e8a64dd): one memory-bound kernel per weight (per expert of a grouped GEMM: TE GroupedLinear keeps one parameter
per expert) reading the product and the main gradient and writing the main gradient.
"""

from __future__ import annotations

from workloads.ops import BYTES_BF16, COMPUTE, MEMORY, Gemm, GraphPart, Op, Role, Step


def main_grad_add(
    wgrad: Gemm, step: Step, deps: tuple[int, ...], layer: int, main_grad_bytes: int, graph: GraphPart
) -> Op:
    """The add kernels of ``step``'s unfused wgrad ``wgrad`` (its product written out): after it, on the compute
    stream."""
    elements = wgrad.m * wgrad.n * wgrad.groups
    return Op(
        f"{step.name}.main_grad_add",
        MEMORY,
        COMPUTE,
        deps,
        Role.WEIGHT_GRAD,
        layer,
        mem_bytes=elements * (BYTES_BF16 + 2 * main_grad_bytes),
        kernels=wgrad.groups,
        module=step.module,
        graph=graph,
    )
