"""The input embedding of the first stage: the lookup forward, the weight gradient backward, and under Megatron's
TP the vocabulary-parallel exchange.

Megatron-Core's VocabParallelEmbedding (megatron/core/tensor_parallel/layers.py, LanguageModelEmbedding in
megatron/core/models/common/embeddings/language_model_embedding.py, at NVIDIA/Megatron-LM 2edffadb, the
Megatron-LM that Megatron-Bridge v0.4.2 pins) holds 1/t of the vocabulary's rows on each TP rank. Forward, every
rank looks up all the micro-batch's tokens with F.embedding (the ones outside its rows masked to row 0), zeroes
the masked output rows, and reduces the [s, h] result over the TP group: a reduce-scatter to the sequence shards
with sequence parallelism (reduce_scatter_embeddings: RoPE, no token types), else an all-reduce. Backward,
F.embedding's gradient is PyTorch's dense one (embedding_dense_backward_cuda -> embedding_backward_cuda_kernel,
aten/src/ATen/native/cuda/Embedding.cu and EmbeddingBackwardKernel.cu, pytorch/pytorch): it allocates a zeroed
gradient as large as the rank's table (``at::zeros({num_weights, grad.size(-1)})``), sorts the token ids, sums
each id's gradient rows into FP32 partial sums (compute_grad_weight) and scatters their sums into its rows
(sum_and_scatter). The embedding has no fused weight-gradient accumulation, so Megatron's DDP hook then adds
that whole table into the parameter's main gradient (``param.main_grad.add_(param.grad.data)``,
megatron/core/distributed/distributed_data_parallel.py _make_backward_post_hook): every micro-batch, the table
is written, read, and the main gradient read and written once each.

Elsewhere (MegaScale-MoE's Ulysses SP and its own TP, whose embedding exchange is not published; one GPU) the
forward keeps the sequence shard's lookup and no exchange; the weight gradient is PyTorch's and Megatron-LM's
alike (MegaScale-MoE is built on Megatron-LM).
Other frameworks (DeepSeek-V3's HAI-LLM, not public): assumed the same, F.embedding's dense gradient added into a
main gradient of the layout's main_grads_dtype.
"""

from __future__ import annotations

from dataclasses import replace

from workloads.ops import BYTES_BF16, MEMORY, Carries, Step
from workloads.recipes.comm_pairs import megatron_tp, tp_pair
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.precision import DTYPE_BYTES

# PyTorch's dense embedding backward per token-row element (EmbeddingBackwardKernel.cu): compute_grad_weight reads
# the BF16 gradient row (2 B) and writes an FP32 partial sum (4 B); sum_and_scatter reads it (4 B) and writes the
# BF16 table row (2 B, at most one per token: repeated ids write fewer).
PARTIAL_SUMS_BYTES_PER_ELEMENT = 2 * BYTES_BF16 + 2 * 4
# Its launches: the sort of the ids and the copy of their positions (Embedding.cu), the zero fill of the table,
# then unique_by_key, krn_partials_per_segment, exclusive_sum, compute_num_of_partial_segments,
# krn_partial_segment_offset, compute_grad_weight and sum_and_scatter (EmbeddingBackwardKernel.cu); one call each
# (cub's sorts and scans may launch more than one kernel). Then the DDP hook's add into the main gradient.
DENSE_BACKWARD_KERNELS = 10
MAIN_GRAD_ADD_KERNELS = 1


def embedding_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """The token embedding on the first stage, one GPU, one micro-batch of ``seq_len`` tokens per sequence."""
    n = layout.intra_size
    vocab_parallel = megatron_tp(layout)  # Megatron-Core's VocabParallelEmbedding over the TP group
    tokens = layout.micro_batch * seq_len if vocab_parallel else layout.micro_batch * seq_len // layout.sequence_shards
    row_bytes = tokens * model.hidden_size * BYTES_BF16
    # forward: F.embedding reads and writes each token's row; under TP the masked rows are zeroed (another read
    # and write of the output) after the masked ids are built (one small kernel)
    forward_bytes = (4 if vocab_parallel else 2) * row_bytes
    forward_kernels = 3 if vocab_parallel else 1
    table = model.vocab_size // n * model.hidden_size  # the rank's rows (embedding_params: vocab-parallel over n)
    main_grad = DTYPE_BYTES[layout.main_grads_dtype]
    # backward: the masked rows' gradient zeroed (TP), the dense gradient's token-row passes, the table zeroed,
    # then read by the main-gradient add, which reads and writes the main gradient
    masked = 2 * row_bytes if vocab_parallel else 0.0
    token_pass = tokens * model.hidden_size * PARTIAL_SUMS_BYTES_PER_ELEMENT
    table_bytes = table * (2 * BYTES_BF16 + 2 * main_grad)
    lookup = Step(
        "embedding",
        MEMORY,
        mem_bytes=forward_bytes,
        kernels=forward_kernels,
        bwd_mem_bytes=masked + token_pass + table_bytes,
        bwd_kernels=int(vocab_parallel) + DENSE_BACKWARD_KERNELS + MAIN_GRAD_ADD_KERNELS,
    )
    if not vocab_parallel:
        return [lookup]
    # the reduce over TP: tp_pair's exit (reduce-scatter with SP, all-gather of the gradient back; else an
    # all-reduce with nothing in backward), on the whole micro-batch's [s, h]
    # (a plain collective: no GEMM beside it to overlap with, and not one of TE's userbuffers layers)
    _, reduce = tp_pair("embedding", n, row_bytes, sequence_parallel=layout.sequence_parallel)
    return [lookup, replace(reduce, fuse="", carries=Carries.OTHER)]
