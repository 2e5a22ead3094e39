"""Megatron-Core's allgather dispatcher (--moe-token-dispatcher-type allgather, TransformerConfig's default;
MoEAllGatherTokenDispatcher, megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM@cf39a4dd,
lines 202-335): every rank all-gathers the TP x EP group's routing map, probs and hidden states
(gather_from_sequence_parallel_region), counts its local experts' tokens and copies the counts to the host
(``local_map.sum(dim=0).long().cpu()``, a host sync), permutes the rows of its local experts out of the
gathered tokens, runs them, unpermutes, and reduce-scatters the outputs back (token_combine)."""

from __future__ import annotations

from dataclasses import replace

from workloads.dispatchers.base import ExpertSteps, MoeContext, TokenDispatcher, Wire
from workloads.dispatchers.steps import BYTES_PROB, ep_collective, host_sync, permute, te_grouped_mlp, unpermute
from workloads.ops import ALL_GATHER, BYTES_BF16, REDUCE_SCATTER, Step, Transport


class AllgatherDispatcher(TokenDispatcher):
    name = "allgather"
    megatron = "--moe-token-dispatcher-type allgather"

    wire = Wire.ALL_GATHER

    def layer_steps(self, ctx: MoeContext, experts: ExpertSteps) -> list[Step]:
        fuse_dispatch = "" if experts.shared or ctx.etp > 1 else "next"
        fuse_combine = "" if ctx.etp > 1 else "prev"
        gather = ep_collective(ctx, "ep_ag_dispatch", ALL_GATHER, Transport.NCCL, dispatch=True, fuse=fuse_dispatch)
        meta = 1 + ctx.num_experts * (1 + BYTES_PROB) / (ctx.hidden * BYTES_BF16)
        return [
            # the routing map (bool) and the probs (FP32) are gathered in their own NCCL calls before the tokens;
            # their bytes (1 + 4 per expert per token) are counted in the tokens' all-gather, without their
            # latency (workloads/dispatchers/steps.py token_count_exchange says why)
            replace(gather, comm_bytes=gather.comm_bytes * meta, nic_bytes=gather.nic_bytes * meta),
            *host_sync(ctx),
            permute(ctx),
            *experts.shared,
            *te_grouped_mlp(ctx, experts),
            unpermute(ctx),
            ep_collective(ctx, "ep_rs_combine", REDUCE_SCATTER, Transport.NCCL, dispatch=False, fuse=fuse_combine),
        ]
