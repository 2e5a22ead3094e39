"""MegaScale-MoE's own dispatch (arXiv 2505.11432, Sec. 3.2 and 4.2): inside a node an all-to-all of every
routed copy (Eq. 3), or, with top-k above a threshold, an all-gather of the node's tokens and a reduce-scatter
on the way back (Fig. 6 / 7); each fused tile by tile into the GEMM next to it when intra-op overlap is on.
Across nodes it moves the tokens DeepEP's way (one NIC copy per destination node, then NVLink), as DeepSeek-V3
does (arXiv 2412.19437, Sec. 3.2.2). The paper's layouts copy no token counts to the host
(layout.host_sync_per_moe_layer off) and permute with fused kernels."""

from __future__ import annotations

from workloads.dispatchers.base import ExpertSteps, MoeContext, TokenDispatcher, Wire
from workloads.dispatchers.steps import ep_collective, fuse_slots, host_sync, permute, unpermute
from workloads.ops import ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER, Step, Transport


class MegaScaleDispatcher(TokenDispatcher):
    name = "megascale"

    def in_node_wire(self, top_k: int, all_gather_above_top_k: int) -> Wire:
        return Wire.ALL_GATHER if top_k > all_gather_above_top_k else Wire.PER_COPY

    def cross_node_wire(self) -> Wire:
        return Wire.PER_RANK

    def transport(self, nodes: int) -> Transport:
        return Transport.DEEPEP if nodes > 1 else Transport.NCCL

    def layer_steps(self, ctx: MoeContext, experts: ExpertSteps) -> list[Step]:
        fuse_dispatch, fuse_combine = fuse_slots(ctx, experts)
        gather = ctx.all_gather
        transport = self.transport(ctx.nodes)
        dispatch = ep_collective(
            ctx,
            "ep_ag_dispatch" if gather else "ep_a2a_dispatch",
            ALL_GATHER if gather else ALL_TO_ALL,
            transport,
            dispatch=True,
            fuse=fuse_dispatch,
        )
        combine = ep_collective(
            ctx,
            "ep_rs_combine" if gather else "ep_a2a_combine",
            REDUCE_SCATTER if gather else ALL_TO_ALL,
            transport,
            dispatch=False,
            fuse=fuse_combine,
        )
        return [
            *host_sync(ctx),
            permute(ctx),
            dispatch,
            *experts.shared,
            *experts.etp_gather,
            *experts.experts,
            *experts.etp_scatter,
            combine,
            unpermute(ctx),
        ]
