"""Megatron-Core's flex dispatcher with the DeepEP backend (--moe-token-dispatcher-type flex
--moe-flex-dispatcher-backend deepep, or --moe-enable-deepep; MoEFlexTokenDispatcher with _DeepepManager,
megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM@cf39a4dd, lines 1054-1281), as issued:

1. setup_metadata: ``torch.topk`` over the probs turns the routing map into per-token expert indices (1 kernel
   reading the FP32 probs, writing k indices and probs per token);
2. DeepEP's fused dispatch (megatron/core/transformer/moe/fused_a2a.py FusedDispatch at cf39a4dd:
   ``buffer.get_dispatch_layout`` then ``buffer.dispatch`` without ``num_worst_tokens``): the layout kernel,
   the notify kernel that exchanges the counts, and a host wait for them (deepseek-ai/DeepEP csrc/deep_ep.cpp
   intranode_dispatch / internode_dispatch: "Synchronize total received tokens and tokens per expert", a CPU
   busy-wait on the mapped counters, skipped only with num_worst_tokens), then the dispatch kernel: one copy of
   a token per destination rank in a node, per destination node across nodes, on DeepEP's SMs;
3. ``fused_indices_to_multihot`` (1 kernel) and the permutation of the received tokens into expert order. Its
   ``num_out_tokens=tokens_per_expert.sum().item()`` (lines 1245-1270) waits for nothing: FusedDispatch builds
   ``tokens_per_expert`` on the host from DeepEP's list (``torch.tensor(num_recv_tokens_per_expert_list)``,
   fused_a2a.py; the same at 0d8e0714 and b0cc2706, the Megatron-Core of Megatron-Bridge v0.2.0 and v0.3.0), so
   the wait of step 2 is the layer's one host sync;
4. the experts, the unpermutation back to received order, and DeepEP's combine (its reduction of a token's
   copies on the way back).
"""

from __future__ import annotations

from workloads.dispatchers.base import ExpertSteps, MoeContext, TokenDispatcher, Wire
from workloads.dispatchers.steps import BYTES_PROB, ep_collective, permute, te_grouped_mlp, unpermute
from workloads.ops import ALL_TO_ALL, HOST_SYNC, MEMORY, Module, Step, Transport

BYTES_INDEX = 8  # int64 expert indices (torch.topk)


def dispatch_layout(ctx: MoeContext) -> list[Step]:
    """get_dispatch_layout and notify_dispatch (2 kernels: the k indices per token read, per-rank and per-expert
    counts and a token-in-rank bool map written) and the host's wait for the received counts before DeepEP can
    size its receive buffers. Its backward (the combine's) reuses the handle: no layout, no wait."""
    mem = ctx.routed * BYTES_INDEX + ctx.tokens * ctx.degree
    layout = Step("deepep_layout_notify", MEMORY, mem_bytes=mem, kernels=2, bwd_kernels=0, module=Module.MOE)
    wait = [Step("deepep_recv_count_sync", HOST_SYNC, module=Module.MOE)] if ctx.host_sync else []
    return [layout, *wait]


def topk_indices(ctx: MoeContext) -> Step:
    """setup_metadata's torch.topk: reads the tokens x experts FP32 probs, writes k FP32 probs and k int64
    indices per token; its backward scatters the k probs' gradients into a zeroed tokens x experts tensor."""
    scores = ctx.tokens * ctx.num_experts
    picked = ctx.routed * (BYTES_PROB + BYTES_INDEX)
    return Step(
        "deepep_topk_indices",
        MEMORY,
        mem_bytes=scores * BYTES_PROB + picked,
        bwd_mem_bytes=scores * BYTES_PROB + ctx.routed * BYTES_PROB,
        bwd_kernels=2,  # zeros + scatter
        module=Module.MOE,
    )


class FlexDeepepDispatcher(TokenDispatcher):
    name = "flex-deepep"
    megatron = "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"

    wire = Wire.PER_RANK
    moved_by = Transport.DEEPEP

    def layer_steps(self, ctx: MoeContext, experts: ExpertSteps) -> list[Step]:
        # fused_indices_to_multihot: the received k indices and probs per token read, a bool map and FP32 probs
        # over the local experts written; counted as the routed copies' indices and probs read and written
        multihot = Step(
            "deepep_indices_to_multihot",
            MEMORY,
            mem_bytes=2 * ctx.routed * (BYTES_PROB + BYTES_INDEX),
            bwd_kernels=1,
            module=Module.MOE,
        )
        return [
            topk_indices(ctx),
            *dispatch_layout(ctx),
            ep_collective(ctx, "ep_a2a_dispatch", ALL_TO_ALL, Transport.DEEPEP, dispatch=True),
            *experts.shared,
            multihot,
            permute(ctx, index_select=True),
            *te_grouped_mlp(ctx, experts),
            unpermute(ctx),
            ep_collective(ctx, "ep_a2a_combine", ALL_TO_ALL, Transport.DEEPEP, dispatch=False),
        ]
