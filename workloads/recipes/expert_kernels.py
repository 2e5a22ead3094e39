"""Memory-bound kernels of clamped and biased experts (GPT-OSS) in Megatron-Core's TEGroupedMLP.

Both read NVIDIA/Megatron-LM at tag core_v0.17.0 (the Megatron Core of Megatron-Bridge 0.4, NeMo 26.04):

- The clamp: ``weighted_bias_quick_geglu_impl`` (megatron/core/fusions/fused_bias_geglu.py) clamps the two
  halves of the FC1 output and concatenates them in eager PyTorch before its fused kernel runs: two clamps
  and a ``torch.cat`` forward; backward, autograd's two clamp masks and the cat of the two halves' gradients
  that ``chunk`` needs. It runs inside the activation, so ``--recompute-modules moe_act`` re-runs it.
- The FC2 bias: TEGroupedMLP builds linear_fc2 with ``skip_bias_add=True`` and ``_apply_bias`` adds
  ``bias * probs`` expert by expert in a Python loop (``t + b * p`` per local expert, then ``torch.cat``);
  backward, each expert's ``b * p`` has two products and two sums (the gradients of the bias and of the
  probs). FC1's bias is added inside TE's GroupedLinear (``skip_bias_add=False``) and costs nothing here.

Elements are BF16 (the router's probs too: gpt_oss_bridge.py leaves moe_router_dtype unset, so they keep
the input's dtype, megatron/core/transformer/moe/router.py at core_v0.17.0).
"""

from __future__ import annotations

from workloads.ops import BYTES_BF16, MEMORY, Module, Step
from workloads.specs.models import ModelSpec


def clamp_steps(model: ModelSpec, rows: int, width: int, module: Module) -> list[Step]:
    """The clamp before a clamped SwiGLU on ``rows`` rows of ``2 x width`` FC1 outputs (all local experts)."""
    if not model.expert_act_clamp:
        return []
    half = rows * width * BYTES_BF16  # bytes of one half (gate or linear)
    # forward: each clamp reads and writes its half (2 x 2 half), the cat reads both and writes both (4 half);
    # backward: each clamp mask reads the gradient and the input and writes one (2 x 3 half), and the cat of
    # the halves' gradients reads and writes both (4 half)
    return [
        Step("act_clamp", MEMORY, mem_bytes=8 * half, kernels=3, bwd_kernels=3, bwd_mem_bytes=10 * half, module=module)
    ]


def fc2_bias_steps(model: ModelSpec, rows: int, experts: int, hidden: int, module: Module) -> list[Step]:
    """``_apply_bias`` after the FC2 grouped GEMM: ``rows`` routed rows over ``experts`` local experts."""
    if not model.expert_bias:
        return []
    out = rows * hidden * BYTES_BF16  # bytes of the FC2 output
    # forward: per expert b * p writes its rows (1 out in all) and t + b p reads two and writes one (3 out);
    # the cat reads and writes them all (2 out). Backward: per expert grad * p and grad * b, each read and
    # written, then summed (reading the product): 2 x 3 out; one kernel more concatenates the probs' gradients.
    return [
        Step(
            "expert_fc2_bias",
            MEMORY,
            mem_bytes=6 * out,
            kernels=2 * experts + 1,
            bwd_kernels=4 * experts + 1,
            bwd_mem_bytes=6 * out,
            module=module,
        )
    ]
