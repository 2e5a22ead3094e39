"""Megatron-Core's alltoall dispatcher (--moe-token-dispatcher-type alltoall; MoEAlltoAllTokenDispatcher,
megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM@cf39a4dd, lines 338-866), as issued:

1. preprocess: per-expert counts and the splits (token_count_exchange; their all-gather over the TP x EP group
   is not emitted yet, workloads/dispatchers/steps.py says why);
2. the counts copied to the host on a side stream (cuda_dtoh_point "before_permutation_1");
3. permutation 1: one row per (token, routed expert), TE's moe_permute when fused, issued before the host waits
   for the counts: dropless, the output size is static (tokens x top-k), so the wait comes before the all-to-all,
   whose NCCL call takes the splits as host lists (cuda_sync_point "before_ep_alltoall"; "before_finish" without
   EP or TP, later still); none under drop-and-pad (layout.host_sync_per_moe_layer). With
   --moe-router-padding-for-quantization (layout.router_quant_padding) the output size is dynamic and the wait moves
   before permutation 1 (preprocess and dispatch_preprocess at NVIDIA/Megatron-LM@d98e8a64dd); not modelled: a
   capacity factor without padding, which moves it there too;
4. the EP all-to-all of the rows and a second one of their probs (NCCL: every routed copy to its expert's
   rank, no deduplication per rank or node), two NCCL calls (steps.probs_all_to_all), and two in backward;
5. permutation 2 with more than one local expert: sort_chunks_by_idxs to expert-major order;
6. the experts (TEGroupedMLP, FP8 padding around them), sort_chunks back, the combine all-to-all, and the
   unpermutation that sums each token's copies weighted by its probs.
"""

from __future__ import annotations

from workloads.dispatchers.base import ExpertSteps, MoeContext, TokenDispatcher, Wire
from workloads.dispatchers.steps import (
    ep_collective,
    fuse_slots,
    host_sync,
    permute,
    probs_all_to_all,
    sort_chunks,
    te_grouped_mlp,
    token_count_exchange,
    unpermute,
)
from workloads.ops import ALL_TO_ALL, Step, Transport


class AlltoallDispatcher(TokenDispatcher):
    name = "alltoall"
    megatron = "--moe-token-dispatcher-type alltoall"

    wire = Wire.PER_COPY

    def layer_steps(self, ctx: MoeContext, experts: ExpertSteps) -> list[Step]:
        fuse_dispatch, fuse_combine = fuse_slots(ctx, experts)
        multi = ctx.degree > 1 or ctx.tp > 1  # preprocess gathers counts only with EP or TP
        early = ctx.router_padded  # num_out_tokens from the padded counts: the host needs them to permute
        return [
            *(token_count_exchange(ctx) if multi and ctx.host_sync else []),
            *(host_sync(ctx) if early else []),
            permute(ctx, index_select=True),
            *(host_sync(ctx) if not early else []),
            ep_collective(ctx, "ep_a2a_dispatch", ALL_TO_ALL, Transport.NCCL, dispatch=True, fuse=fuse_dispatch),
            probs_all_to_all(ctx),
            *sort_chunks(ctx, "sort_chunks"),
            *experts.shared,
            *te_grouped_mlp(ctx, experts),
            *sort_chunks(ctx, "unsort_chunks"),
            ep_collective(ctx, "ep_a2a_combine", ALL_TO_ALL, Transport.NCCL, dispatch=False, fuse=fuse_combine),
            unpermute(ctx),
        ]
