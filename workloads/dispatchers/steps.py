"""The steps token dispatchers share: the EP collectives, permutations, host sync, Megatron-Core's token-count
exchange, sort-chunks and TE's FP8 padding, each with its bytes, launches and backward.

Sizes are per GPU; token rows are BF16 (2 bytes per element), the router's probs FP32 (4 bytes: the perf
test's --moe-router-dtype fp32; BF16 probs would halve a term that is h / 2 times smaller than the rows').
"""

from __future__ import annotations

from workloads.dispatchers.base import ExpertSteps, MoeContext
from workloads.ops import (
    ALL_TO_ALL,
    BYTES_BF16,
    HOST_SYNC,
    MEMORY,
    MEMORY_BACKWARD_FACTOR,
    Carries,
    Group,
    Module,
    Step,
    Transport,
    comm_step,
)

# Unfused permutation and routing (Megatron-LM at the paper's commit): index expansion, separate gather,
# probability multiply and scatter kernels. Assumed: 4 kernels and 2 HBM passes where a fused kernel needs
# 1 and 1.
UNFUSED_KERNELS = 4
UNFUSED_PASSES = 2
BYTES_PROB = 4  # FP32 router probs
BYTES_COUNT = 8  # int64 token counts
M = Module.MOE

# MoEAlltoAllTokenDispatcher.preprocess (megatron/core/transformer/moe/token_dispatcher.py at
# NVIDIA/Megatron-LM@cf39a4dd, lines 434-555), dropless: routing_map.sum(dim=0) (reads the bool map), the
# input splits' reshape-sum, the gathered counts' slice made contiguous, and three sums (tokens per rank,
# output_splits_tp, tokens per local expert): 6 kernels besides the all-gather, on a few hundred bytes.
COUNT_KERNELS = 6


def kernels_passes(fused: bool) -> tuple[int, int]:
    """Launches and HBM passes of a permutation: TE's fused kernel, or Megatron-Core's unfused torch ops."""
    return (1, 1) if fused else (UNFUSED_KERNELS, UNFUSED_PASSES)


def ep_collective(
    ctx: MoeContext,
    name: str,
    collective: str,
    transport: Transport,
    *,
    dispatch: bool,
    fuse: str = "",
) -> Step:
    """The dispatch (``dispatch``) or the combine: the plan's bytes, over every rank of the EP group.

    group_size is every rank of the EP group, wherever it sits: a pairwise exchange takes one step per peer
    (Thakur et al. 2005, Sec. 3.6), and counting only a node's members made one 64-rank exchange cost 7 steps
    over 8 nodes but 63 in one node, so bigger nodes looked slower (issue #13)."""
    common = {
        "comm_bytes": ctx.nvlink_bytes,
        "nic_bytes": ctx.nic_bytes,
        "group_size": ctx.degree,
        "module": M,
        "transport": transport,
        "sms": ctx.comm_sms if transport.deepep_class else 0,  # NCCL's channels are its own (comm_kernel_sms)
        "fuse": fuse,
    }
    if dispatch:
        return comm_step(
            name, collective, Group.EP, sar_recompute=True, routed_copies=True, carries=Carries.INTO_GEMM, **common
        )
    return comm_step(name, collective, Group.EP, carries=Carries.OUT_OF_GEMM, **common)


def probs_all_to_all(ctx: MoeContext, name: str = "ep_a2a_probs") -> Step:
    """MoEAlltoAllTokenDispatcher.token_dispatch's second NCCL all-to-all: the router's probs of every routed row,
    one FP32 per row, sent with the rows' splits right after the rows' own all-to-all (token_dispatcher.py at
    NVIDIA/Megatron-LM@2a75ac12, the Megatron-Core Megatron-Bridge@067f987d pins, lines 704-723: "Forward launch
    order: tokens A2A -> ... -> probs A2A", "Backward launch order: probs A2A -> tokens A2A"). Its own NCCL call,
    so its own latency and launch; its backward (_AllToAll.backward) sends the probs' gradients back, FP32 too,
    just before the rows' gradients, which the op list's reversed order gives. The rows' bytes times
    4 / 2h on each link; FP8 communication leaves it FP32 (Carries.OTHER). Re-sent with the rows under SAR."""
    scale = BYTES_PROB / (ctx.hidden * BYTES_BF16)
    return comm_step(
        name,
        ALL_TO_ALL,
        Group.EP,
        comm_bytes=ctx.nvlink_bytes * scale,
        nic_bytes=ctx.nic_bytes * scale,
        group_size=ctx.degree,
        module=M,
        transport=Transport.NCCL,
        sar_recompute=True,
        routed_copies=True,
    )


def permute(ctx: MoeContext, index_select: bool = False) -> Step:
    """Token copies gathered into expert order (read and written once per pass). Its backward is the gather's
    transpose, a scatter-add: each copy's gradient read once and each token's gradient written once per pass
    (Megatron-Core moe_gather.backward, torch.zeros + scatter_add_, megatron/core/transformer/moe/moe_utils.py at
    f1f03922), not twice the forward's copies.

    ``index_select``: Megatron-Core's own unfused permute since ADLR/megatron-lm!1915 (2024-10-29; moe_utils.py
    permute at core_v0.13.0-0.16.0: ``tokens.index_select(0, sorted_indices)``), which its alltoall, allgather and
    DeepEP dispatchers run without --moe-permute-fusion: autograd's backward of index_select zeroes the token rows
    and scatters the copies' gradients into them with index_add_, a kernel bound by its per-element index
    arithmetic (Calibration.index_add_elements_per_s_per_sm), so the backward is that memset and the scatter, timed
    by its elements, instead of the passes above."""
    kernels, passes = kernels_passes(ctx.fused_permute)
    if index_select and not ctx.fused_permute:
        backward = {
            "bwd_mem_bytes": ctx.tokens * ctx.hidden * BYTES_BF16,  # torch.zeros of the token rows
            "bwd_kernels": 2,
            "bwd_index_add_elements": ctx.routed * ctx.hidden,
        }
    else:
        backward = {"bwd_mem_bytes": passes * (ctx.routed + ctx.tokens) * ctx.hidden * BYTES_BF16}
    return Step(
        "permute",
        MEMORY,
        mem_bytes=passes * 2 * ctx.routed * ctx.hidden * BYTES_BF16,
        kernels=kernels,
        sar_recompute=True,
        routed_copies=True,
        module=M,
        **backward,
    )


def unpermute(ctx: MoeContext, grad_staging_bytes: float = 0.0) -> Step:
    """The expert outputs summed back into token order (weighted by the probs). ``grad_staging_bytes``: a copy
    the combine's backward (a dispatch) makes first, one launch more (HybridEP across nodes)."""
    kernels, passes = kernels_passes(ctx.fused_permute)
    mem_bytes = passes * (ctx.routed + ctx.tokens) * ctx.hidden * BYTES_BF16
    return Step(
        "unpermute",
        MEMORY,
        mem_bytes=mem_bytes,
        kernels=kernels,
        bwd_kernels=kernels + 1 if grad_staging_bytes else None,
        bwd_mem_bytes=MEMORY_BACKWARD_FACTOR * mem_bytes + grad_staging_bytes if grad_staging_bytes else None,
        module=M,
    )


def host_sync(ctx: MoeContext) -> list[Step]:
    """Token counts per expert copied to the host before the expert GEMMs (the host waits for them)."""
    return [Step("tokens_per_expert_sync", HOST_SYNC, module=M)] if ctx.host_sync else []


def token_count_exchange(ctx: MoeContext) -> list[Step]:
    """MoEAlltoAllTokenDispatcher.preprocess, dropless: the counts kernels before the all-to-all's splits can go to
    the host. No backward (counts carry no gradient).

    Not emitted: the all-gather of every rank's per-expert counts over the TP x EP group between them
    (gather_from_sequence_parallel_region, NCCL's all-gather of E int64 per rank: a few hundred bytes, so its
    latency, 8.4 + 7 x 3.4 = 32 us in a node of 8 by NCCL's model). Megatron-Core's combined 1F1B
    (workloads/graph/combined_1f1b.py) cuts a layer at exactly two EP collectives, its dispatch and combine; a
    third would make the layer one piece and take EP overlap's gain away, so it waits for that cut to learn it."""
    return [
        Step(
            "ep_token_counts",
            MEMORY,
            mem_bytes=ctx.tokens * ctx.num_experts,  # the bool routing map read once
            kernels=COUNT_KERNELS,
            bwd_kernels=0,
            module=M,
        )
    ]


def sort_chunks(ctx: MoeContext, name: str) -> list[Step]:
    """Megatron-Core's sort_chunks_by_idxs with more than one local expert (token_dispatcher.py at
    NVIDIA/Megatron-LM@cf39a4dd, lines 697 and 732): the received rows regrouped from [rank, local expert] to
    [local expert, rank] order before the experts (and back after them), a copy that reads and writes every row
    and its prob. Fused: TE's moe_sort_chunks_by_index, 1 kernel; unfused: torch.split (views) and a torch.cat of
    the rows and one of the probs, 2 kernels. Backward is the inverse permutation, the same copy (TE's backward
    kernel; SplitBackward's cat)."""
    if ctx.experts_local <= 1:
        return []
    rows = ctx.routed * ctx.etp
    mem = 2 * rows * (ctx.hidden * BYTES_BF16 + BYTES_PROB)
    kernels = 1 if ctx.fused_permute else 2
    return [Step(name, MEMORY, mem_bytes=mem, kernels=kernels, bwd_mem_bytes=mem, bwd_kernels=kernels, module=M)]


def quant_padding(ctx: MoeContext) -> tuple[list[Step], list[Step]]:
    """TEGroupedMLP under FP8 / FP4 (megatron/core/transformer/moe/experts.py at NVIDIA/Megatron-LM@cf39a4dd,
    lines 629-632, 672-680, 768-770): Fp8Padding pads each local expert's rows to the recipe's alignment (16;
    32 for MXFP8) before the grouped GEMMs, its probs too, and Fp8Unpadding drops the pad rows after them.
    TE's fused_multi_row_padding / unpadding read and write every row; TE skips both only when every count is
    already aligned (NVIDIA/TransformerEngine@001b2b1e transformer_engine/pytorch/module/fp8_padding.py, "no
    padding needed"), which dropless routing's data-dependent counts are not, so they are charged whenever
    ``quant_align`` is set. The pad rows' extra GEMM work (at most align - 1 rows per expert) is not counted.
    None where the router pads the counts already (--moe-router-padding-for-quantization: moe_utils.py
    skip_routed_expert_padding at NVIDIA/Megatron-LM@d98e8a64dd; its pad rows are not counted either: balanced
    counts of the usual shapes, tokens x top-k / experts, are multiples of the alignment already).
    Returns (before the experts, after them); each one's backward is the other's copy."""
    if not ctx.quant_align or ctx.router_padded:
        return [], []
    rows = ctx.routed * ctx.etp
    row_bytes = 2 * rows * ctx.hidden * BYTES_BF16
    pad = Step(
        "quant_pad",
        MEMORY,
        mem_bytes=row_bytes + 2 * rows * BYTES_PROB,
        kernels=2,
        bwd_mem_bytes=row_bytes + 2 * rows * BYTES_PROB,
        bwd_kernels=2,
        module=M,
    )
    unpad = Step("quant_unpad", MEMORY, mem_bytes=row_bytes, kernels=1, bwd_mem_bytes=row_bytes, module=M)
    return [pad], [unpad]


def te_grouped_mlp(ctx: MoeContext, experts: ExpertSteps, padded: bool = True) -> list[Step]:
    """The experts as Megatron-Core's TEGroupedMLP runs them: the ETP all-gather, the FP8 / FP4 padding
    (``quant_padding``; not where the dispatcher pads, ``padded`` False), the grouped GEMMs and activation, the
    unpadding and the ETP reduce-scatter."""
    pad, unpad = quant_padding(ctx) if padded else ([], [])
    return [*experts.etp_gather, *pad, *experts.experts, *unpad, *experts.etp_scatter]


def fuse_slots(ctx: MoeContext, experts: ExpertSteps) -> tuple[str, str]:
    """Where the dispatch and the combine may fuse into the GEMM beside them (MegaScale-MoE's intra-op overlap,
    arXiv 2505.11432 Sec. 4.2; a no-op where intra-op overlap is off, as in Megatron-Core's layouts): the dispatch
    into the next GEMM unless shared experts hide it, the combine into the previous one; with ETP, the ETP
    all-gather and reduce-scatter take those slots."""
    return ("" if experts.shared or ctx.etp > 1 else "next"), ("" if ctx.etp > 1 else "prev")
