"""RMSNorm steps as Transformer Engine runs them: one kernel forward, two backward, with their bytes.

Forward, one kernel reads the input and writes the normalized output (2 passes over the tensor; the gains and
the per-row rsigma are small). Backward, TE launches two kernels per norm: the first reads the output gradient
and the saved input and writes the input gradient (3 passes) with per-CTA partial sums of the gains' gradient,
the second (the finalize kernel) reduces those partials into the gains' gradient (small):
NVIDIA/TransformerEngine@d0067d0d transformer_engine/common/normalization/rmsnorm/rmsnorm_bwd_kernels.cuh
(rmsnorm_bwd_tuned_kernel loads ``dz`` and ``x``, stores ``dx`` and ``dgamma_part``;
rmsnorm_bwd_finalize_tuned_kernel) and rmsnorm_bwd_semi_cuda_kernel.cu (both launched per call, the general
kernels alike). Megatron-Core's norms are TE's under the TE spec: TELayerNormColumnParallelLinear's fused norm
and TENorm (input, pre-MLP, final, and the q / k / latent norms)."""

from __future__ import annotations

from workloads.ops import MEMORY, Step

NORM_FWD_PASSES = 2  # read x, write y
NORM_BWD_PASSES = 3  # read dy and x, write dx
NORM_BWD_KERNELS = 2  # the gradient kernel and the gains' finalize kernel


def norm_step(name: str, tensor_bytes: float, tensors: int = 1, **fields: object) -> Step:
    """An RMSNorm over ``tensors`` tensors of ``tensor_bytes`` bytes in all (one TE call, one kernel each,
    forward; two each backward)."""
    return Step(
        name,
        MEMORY,
        mem_bytes=NORM_FWD_PASSES * tensor_bytes,
        kernels=tensors,
        bwd_mem_bytes=NORM_BWD_PASSES * tensor_bytes,
        bwd_kernels=NORM_BWD_KERNELS * tensors,
        **fields,
    )
