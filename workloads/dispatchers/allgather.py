"""Megatron-Core's allgather dispatcher (--moe-token-dispatcher-type allgather, TransformerConfig's default;
MoEAllGatherTokenDispatcher, megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM@cf39a4dd,
lines 202-335): every rank all-gathers the TP x EP group's routing map, probs and hidden states
(gather_from_sequence_parallel_region), counts its local experts' tokens and copies the counts to the host
(``local_map.sum(dim=0).long().cpu()``, a host sync), permutes the rows of its local experts out of the
gathered tokens, runs them, unpermutes, and reduce-scatters the outputs back (token_combine).

Its dispatch_postprocess blocks the host more than once (NVIDIA/Megatron-LM core_v0.15.0,
megatron/core/transformer/moe/token_dispatcher.py MoEAllGatherTokenDispatcher.dispatch_postprocess and
moe_utils.py permute): besides the counts' ``.cpu()``, ``local_probs.T.contiguous().masked_select(local_map.T...)``
runs whether or not the permutation is fused, and the unfused permute's ``token_indices.masked_select(routing_map)``
builds its gather indices the same way. A masked select's output size is the mask's count, so PyTorch's CUDA
masked_select (boolean-mask indexing) calls nonzero, whose count is copied to the host with a
cudaStreamSynchronize (pytorch/pytorch issue #12461, ngimel 2019-12-23: "nonzero that is called in this conversion
has a legitimate synchronization"; the cudaStreamSynchronize in nonzero: pytorch/pytorch PR #44259): one host sync
each, at the point it runs.

Not priced beyond the assumed passes of workloads/dispatchers/steps.py (no published H100 rate found): at
core_v0.15.0 the unfused permute is ``tokens.index_select(0, sorted_indices)`` (backward: torch.zeros and
``index_add_``, one BF16 atomic add per routed element) and the unpermute ``torch.zeros`` and
``scatter_add_`` with the int64 index expanded to [rows, h] (backward: ``gather``). PyTorch runs index_add_ on its
64-bit generic-dims kernel once the source passes 2**31 elements (aten/src/ATen/native/cuda/Indexing.cu
index_add_cuda_impl, canUse32BitIndexMath), which top-16 routing of 32,768 tokens at h 4,096 reaches."""

from __future__ import annotations

from dataclasses import replace

from workloads.dispatchers.base import ExpertSteps, MoeContext, TokenDispatcher, Wire
from workloads.dispatchers.steps import (
    BYTES_PROB,
    ep_collective,
    fuse_slots,
    host_sync,
    permute,
    te_grouped_mlp,
    unpermute,
)
from workloads.ops import ALL_GATHER, BYTES_BF16, HOST_SYNC, REDUCE_SCATTER, Module, Step, Transport


def _masked_select_sync(ctx: MoeContext, name: str, *, unfused_only: bool) -> list[Step]:
    """A masked_select's host sync (the module docstring says which and why); the layouts without the counts'
    sync (ctx.host_sync off) have none either."""
    if not ctx.host_sync or (unfused_only and ctx.fused_permute):
        return []
    return [Step(name, HOST_SYNC, module=Module.MOE)]


class AllgatherDispatcher(TokenDispatcher):
    name = "allgather"
    megatron = "--moe-token-dispatcher-type allgather"

    wire = Wire.ALL_GATHER

    def layer_steps(self, ctx: MoeContext, experts: ExpertSteps) -> list[Step]:
        fuse_dispatch, fuse_combine = fuse_slots(ctx, experts)
        gather = ep_collective(ctx, "ep_ag_dispatch", ALL_GATHER, Transport.NCCL, dispatch=True, fuse=fuse_dispatch)
        meta = 1 + ctx.num_experts * (1 + BYTES_PROB) / (ctx.hidden * BYTES_BF16)
        return [
            # the routing map (bool) and the probs (FP32) are gathered in their own NCCL calls before the tokens;
            # their bytes (1 + 4 per expert per token) are counted in the tokens' all-gather, without their
            # latency (workloads/dispatchers/steps.py token_count_exchange says why)
            replace(gather, comm_bytes=gather.comm_bytes * meta, nic_bytes=gather.nic_bytes * meta),
            *host_sync(ctx),
            *_masked_select_sync(ctx, "permute_indices_sync", unfused_only=True),
            permute(ctx, index_select=True),
            *_masked_select_sync(ctx, "local_probs_sync", unfused_only=False),
            *experts.shared,
            *te_grouped_mlp(ctx, experts),
            unpermute(ctx),
            ep_collective(ctx, "ep_rs_combine", REDUCE_SCATTER, Transport.NCCL, dispatch=False, fuse=fuse_combine),
        ]
