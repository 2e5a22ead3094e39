"""The SwiGLU between an FFN's two GEMMs: one fused kernel, or Megatron-Core's eager PyTorch ops.

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


def swiglu_step(
    name: str,
    elements: int,
    *,
    fused: bool,
    probs: bool,
    module: Module,
    launches: int = 1,
    overlap_comm: bool = False,
) -> Step:
    """The SwiGLU of ``elements`` output elements: fused, or Megatron-Core's eager ops (``probs``: an
    expert MLP's, with the router's probs multiplied in). ``launches``: how many times the ops run (each
    local expert's MLP on its own, SequentialMLP)."""
    element = elements * BYTES_BF16
    if fused:  # its backward: the forward's kernels at ops.MEMORY_BACKWARD_FACTOR x its bytes (None, None)
        return Step(
            name,
            MEMORY,
            mem_bytes=FUSED_FWD_PASSES * element,
            kernels=FUSED_KERNELS * launches,
            overlap_comm=overlap_comm,
            module=module,
        )
    fwd, fwd_kernels, bwd, bwd_kernels = EAGER_EXPERT if probs else EAGER_DENSE
    return Step(
        name,
        MEMORY,
        mem_bytes=fwd * element,
        kernels=fwd_kernels * launches,
        bwd_mem_bytes=bwd * element,
        bwd_kernels=bwd_kernels * launches,
        overlap_comm=overlap_comm,
        module=module,
    )
