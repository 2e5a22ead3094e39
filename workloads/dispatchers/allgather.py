"""Megatron-Core's allgather dispatcher (--moe-token-dispatcher-type allgather, TransformerConfig's default;
MoEAllGatherTokenDispatcher, megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM@cf39a4dd,
lines 202-335): every rank all-gathers the TP x EP group's routing map, probs and hidden states
(gather_from_sequence_parallel_region), counts its local experts' tokens and copies the counts to the host
(``local_map.sum(dim=0).long().cpu()``, a host sync), permutes the rows of its local experts out of the
gathered tokens, runs them, unpermutes, and reduce-scatters the outputs back (token_combine)."""

from __future__ import annotations

from workloads.dispatchers.base import ExpertSteps, MoeContext, TokenDispatcher, Wire
from workloads.dispatchers.steps import BYTES_PROB, ep_collective, host_sync, permute, quant_padding, unpermute
from workloads.ops import ALL_GATHER, BYTES_BF16, REDUCE_SCATTER, Group, Module, Step, Transport, comm_step


class AllgatherDispatcher(TokenDispatcher):
    name = "allgather"
    megatron = "--moe-token-dispatcher-type allgather"

    def in_node_wire(self, top_k: int, all_gather_above_top_k: int) -> Wire:
        return Wire.ALL_GATHER

    def cross_node_wire(self) -> Wire:
        return Wire.PER_RANK  # the plan's cross-node bytes (workloads/ep/plan.py); not separately published

    def transport(self, nodes: int) -> Transport:
        return Transport.NCCL

    def layer_steps(self, ctx: MoeContext, experts: ExpertSteps) -> list[Step]:
        fuse_dispatch = "" if experts.shared or ctx.etp > 1 else "next"
        fuse_combine = "" if ctx.etp > 1 else "prev"
        pad, unpad = quant_padding(ctx)
        return [
            *self._metadata_gathers(ctx),
            ep_collective(ctx, "ep_ag_dispatch", ALL_GATHER, Transport.NCCL, dispatch=True, fuse=fuse_dispatch),
            *host_sync(ctx),
            permute(ctx),
            *experts.shared,
            *experts.etp_gather,
            *pad,
            *experts.experts,
            *unpad,
            *experts.etp_scatter,
            unpermute(ctx),
            ep_collective(ctx, "ep_rs_combine", REDUCE_SCATTER, Transport.NCCL, dispatch=False, fuse=fuse_combine),
        ]

    @staticmethod
    def _metadata_gathers(ctx: MoeContext) -> list[Step]:
        """The routing map (bool, no gradient) and the probs (FP32; reduce-scattered back in backward), gathered
        like the hidden states: the tokens' bytes scaled by a map's or a prob row's width over a token's."""
        if ctx.degree <= 1:
            return []
        row = ctx.hidden * BYTES_BF16
        out = []
        for name, width, backward in (
            ("ep_ag_routing_map", ctx.num_experts, False),
            ("ep_ag_probs", ctx.num_experts * BYTES_PROB, True),
        ):
            scale = width / row
            out.append(
                comm_step(
                    name,
                    ALL_GATHER,
                    Group.EP,
                    comm_bytes=ctx.nvlink_bytes * scale,
                    nic_bytes=ctx.nic_bytes * scale,
                    group_size=ctx.degree,
                    module=Module.MOE,
                    transport=Transport.NCCL,
                    **({} if backward else {"bwd_kernels": 0}),
                )
            )
        return out
