"""The activation between an FFN's two GEMMs: SwiGLU as one fused kernel or Megatron-Core's eager PyTorch ops, or a
plain MLP's GeLU or squared ReLU (``plain_activation_step``, at the end).

Megatron-Core fuses it when ``bias_activation_fusion`` is set: Megatron-LM's command line sets it by default
(``--bias-swiglu-fusion``, off with ``--no-bias-swiglu-fusion``; megatron/training/arguments.py), a
TransformerConfig built directly leaves it off (transformer_config.py: ``bias_activation_fusion = False``),
as SonicMoE's Megatron benchmark does (experiments/validation/moe_layer_check.py). Every Megatron-Bridge run of the
validation corpus fuses it (NVIDIA-NeMo/Megatron-Bridge v0.5.0: provider.bias_activation_fusion = True in
deepseek_v3_bridge.py, gpt_oss_bridge.py and llama_bridge.py; cfg.model.bias_activation_fusion = True in
scripts/performance/configs/qwen/qwen3_llm_pretrain.py). The kernel lists below read
NVIDIA/Megatron-LM at tag core_v0.15.0:

- fused: ``bias_swiglu_impl`` (dense MLP) or ``weighted_bias_swiglu_impl`` (experts, the router's probs
  applied inside): one kernel that reads the gate and linear halves and writes the product.
- eager, dense (mlp.py ``glu``): ``torch.chunk`` (views), ``silu`` of the gate half, ``x_linear +
  glu_linear_offset`` (a kernel even at the default offset 0.0) and their product: 3 kernels; backward,
  the product's two gradients, silu's backward and the ``torch.cat`` of the two halves' gradients that
  ``chunk`` needs: 4 kernels.
- eager, experts (experts.py TEGroupedMLP ``bias_act_func``, SequentialMLP's experts alike): the dense
  ops, then ``* permuted_probs`` (the probs stay BF16: the router keeps the logits' dtype when
  ``moe_router_dtype`` is unset, so the ``.to(original_dtype)`` after it is no kernel): 4 kernels;
  backward, the probs product's two gradients (the probs' one a product and a row sum) on top: 7 kernels.

Bytes are counted per element of the activation's output (rows x width, BF16): a kernel reading a and
writing b such elements moves 2 (a + b) bytes; the probs (one per row) are left out.

Saved for backward (simulator/memory/activations.py), beyond the FC1 output (the gate half's silu reads it) and the
FC2 input that every path keeps: the eager product keeps both its factors, silu's output and the offset
linear half; the experts' probs product keeps its input too. The fused kernel keeps nothing more.
"""

from __future__ import annotations

from workloads.ops import BYTES_BF16, MEMORY, Module, Step

# Element passes (reads + writes, in output elements) and kernels of one SwiGLU, forward and backward.
# fused: gate + linear read, product written; its backward stays at ops.MEMORY_BACKWARD_FACTOR (None)
FUSED_FWD_PASSES, FUSED_KERNELS = 3, 1
# eager dense: silu (1 + 1), the offset add (1 + 1), the product (2 + 1)
EAGER_DENSE_FWD_PASSES, EAGER_DENSE_FWD_KERNELS = 7, 3
# backward: the product's gradients (2 + 1 each), silu's backward (2 + 1), the cat (2 + 2)
EAGER_DENSE_BWD_PASSES, EAGER_DENSE_BWD_KERNELS = 13, 4
# eager experts: the dense ops and the probs product (1 + 1)
EAGER_EXPERT_FWD_PASSES, EAGER_EXPERT_FWD_KERNELS = 9, 4
# backward: the dense backward, the probs product's input gradient (1 + 1), its probs gradient: the
# product of the gradient and the saved input (2 + 1) and the row sum (1)
EAGER_EXPERT_BWD_PASSES, EAGER_EXPERT_BWD_KERNELS = 19, 7
EAGER_DENSE = (EAGER_DENSE_FWD_PASSES, EAGER_DENSE_FWD_KERNELS, EAGER_DENSE_BWD_PASSES, EAGER_DENSE_BWD_KERNELS)
EAGER_EXPERT = (EAGER_EXPERT_FWD_PASSES, EAGER_EXPERT_FWD_KERNELS, EAGER_EXPERT_BWD_PASSES, EAGER_EXPERT_BWD_KERNELS)
# tensors of the output's size that the eager ops keep for backward (dense, experts)
EAGER_DENSE_SAVED, EAGER_EXPERT_SAVED = 2, 3
# A plain MLP's activation (FC1 as wide as FC2's input): one kernel that reads its input and writes its output,
# whichever path runs it: Megatron-Core's fused bias_gelu_impl (megatron/core/fusions/fused_bias_gelu.py, under
# bias_activation_fusion), eager F.gelu, or squared_relu, itself a jit_fuser function (megatron/core/activations.py);
# backward one kernel reading the gradient and the input and writing the input's gradient (bias_gelu_back, or the
# fused function's autograd).
PLAIN_FWD_PASSES, PLAIN_BWD_PASSES = 2, 3
# Experts multiply the router's probs in; eager (no weighted fused kernel), as the gated experts' eager product above:
# forward (1 + 1), backward the input gradient (1 + 1), the probs gradient's product (2 + 1) and row sum (1)
PROBS_FWD_PASSES, PROBS_FWD_KERNELS, PROBS_BWD_PASSES, PROBS_BWD_KERNELS = 2, 1, 6, 3
# the eager probs product keeps its input (the activation's output) for backward
PLAIN_EXPERT_SAVED = 1


def activation_passes(gated: bool, fused: bool, probs: bool) -> tuple[int, int, int | None, int | None]:
    """(forward element passes, forward kernels, backward passes, backward kernels) of one FFN activation: SwiGLU
    (``gated``) fused, whose backward stays at ops.MEMORY_BACKWARD_FACTOR x its forward (None, None), or as
    Megatron-Core's eager ops; a plain MLP's (GeLU, squared ReLU), an expert's (``probs``) with the router's probs
    multiplied in by an eager product unless ``fused`` (Megatron-Core's weighted_squared_relu_impl,
    megatron/core/fusions/fused_weighted_squared_relu.py, applies them inside)."""
    if gated:
        if fused:
            return FUSED_FWD_PASSES, FUSED_KERNELS, None, None
        return EAGER_EXPERT if probs else EAGER_DENSE
    if probs and not fused:
        return (
            PLAIN_FWD_PASSES + PROBS_FWD_PASSES,
            1 + PROBS_FWD_KERNELS,
            PLAIN_BWD_PASSES + PROBS_BWD_PASSES,
            1 + PROBS_BWD_KERNELS,
        )
    return PLAIN_FWD_PASSES, 1, PLAIN_BWD_PASSES, 1


def activation_step(
    name: str,
    elements: int,
    *,
    gated: bool,
    fused: bool,
    probs: bool,
    module: Module,
    launches: int = 1,
    overlap_comm: bool = False,
) -> Step:
    """The FFN activation on ``elements`` output elements (``activation_passes``). ``launches``: how many times
    the ops run (each local expert's MLP on its own, SequentialMLP)."""
    fwd, fwd_kernels, bwd, bwd_kernels = activation_passes(gated, fused, probs)
    element = elements * BYTES_BF16
    return Step(
        name,
        MEMORY,
        mem_bytes=fwd * element,
        kernels=fwd_kernels * launches,
        bwd_mem_bytes=None if bwd is None else bwd * element,
        bwd_kernels=None if bwd_kernels is None else bwd_kernels * launches,
        overlap_comm=overlap_comm,
        module=module,
    )


def eager_saved(gated: bool, probs: bool) -> int:
    """Tensors of the activation's output size that its unfused ops keep for backward beyond FC1's output and FC2's
    input (simulator/memory/activations.py)."""
    if gated:
        return EAGER_EXPERT_SAVED if probs else EAGER_DENSE_SAVED
    return PLAIN_EXPERT_SAVED if probs else 0
