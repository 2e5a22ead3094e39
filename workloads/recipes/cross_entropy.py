"""The cross-entropy kernels after the LM head: memory-bound steps with their bytes and launches.

Megatron-Core with --cross-entropy-loss-fusion --cross-entropy-fusion-impl te (every Megatron-Bridge performance
recipe: scripts/performance/utils/overrides.py _set_common_perf_overrides at fcbb603 and c810129; the
GPTModelProvider default keeps cross_entropy_loss_fusion on) calls TE's Triton cross entropy on the BF16 logits
(LanguageModule.compute_language_model_loss, megatron/core/models/common/language_module/language_module.py at
core_v0.18.0; transformer_engine/pytorch/triton/cross_entropy.py at TE 4220403, v2.16), per ``scores`` logits
of a GPU:

- forward, 6 launches: 3 torch.zeros (loss, per-row statistics, token count), online_softmax_kernel (reads the
  logits), a clamp, cross_entropy_kernel (reads them again and writes their gradient in place, kept for
  backward): 3 x 2 B per logit; with micro-batches of more than one sequence the [b, s] <-> [s, b] transposes
  of the labels and of the loss are copies too (``.contiguous()``; a size-1 dimension makes them views): 2 more;
- backward, 2 launches: the scalar ``torch.tensor(1.0)`` that cross_entropy_backward compares the gradient with
  (an H2D copy; the shapes differ, so no sync) and element_mul_kernel scaling the stored gradient in place:
  2 x 2 B per logit; 1 more (the loss gradient's transpose copy) with micro-batches of several sequences.

Without the flags moesim keeps its former assumption: 3 FP32 passes over the logits, one kernel.
Not declared: under TP, TE's all-gather of the 3 FP32 per-row statistics over the TP group (12 B per token).
"""

from __future__ import annotations

from workloads.ops import BYTES_BF16, MEMORY, Step

TE_FORWARD_KERNELS = 6
TE_FORWARD_BYTES_PER_LOGIT = 3 * BYTES_BF16
TE_BACKWARD_KERNELS = 2
TRANSPOSE_COPIES = (2, 1)  # forward, backward: with more than one sequence per micro-batch
TE_BACKWARD_BYTES_PER_LOGIT = 2 * BYTES_BF16
UNFUSED_FP32_PASSES = 3  # assumed (moesim's former model): three FP32 passes over the logits


def cross_entropy_step(impl: str, logits: int, micro_batch: int) -> Step:
    """The loss over ``logits`` logits of one GPU: TE's kernels ("te") or the assumed FP32 passes ("")."""
    if impl == "te":
        copies = TRANSPOSE_COPIES if micro_batch > 1 else (0, 0)
        return Step(
            "cross_entropy",
            MEMORY,
            mem_bytes=TE_FORWARD_BYTES_PER_LOGIT * logits,
            kernels=TE_FORWARD_KERNELS + copies[0],
            bwd_mem_bytes=TE_BACKWARD_BYTES_PER_LOGIT * logits,
            bwd_kernels=TE_BACKWARD_KERNELS + copies[1],
        )
    return Step("cross_entropy", MEMORY, mem_bytes=UNFUSED_FP32_PASSES * 4 * logits)
