"""Megatron-Core's flex dispatcher with the HybridEP backend (--moe-token-dispatcher-type flex
--moe-flex-dispatcher-backend hybridep): the kernels around its dispatch and combine.

moesim times HybridEP's dispatch / combine as DeepEP's (one copy per destination rank or node, DeepEP's SMs and
NIC rate; Transport.HYBRIDEP) at HybridEP's own published NVLink 5 rates on a B200 / GB200 NVL (simulator/costs/
collective_efficiency.py HYBRIDEP_NVLINK5_GBPS), DeepEP's elsewhere (HybridEP's H100 table is for 16-64 ranks
over IB), and its permute / unpermute
as the other dispatchers' (workloads/dispatchers/steps.py; HybridEP issues the permute inside its dispatch
call, after the tokens arrive, timed the same). Declared here are the kernels and the collective HybridEP runs
besides them,
counted from Megatron-Core core_v0.18.0 (commit ba7b5eb) megatron/core/transformer/moe/token_dispatcher.py
_HybridEPManager and fused_a2a.py HybridEPDispatch / HybridEPCombine, and the DeepEP the Megatron-Bridge
v0.5.0 image builds (docker/Dockerfile.ci DEEPEP_COMMIT 34152ae, hybrid-ep branch): csrc/hybrid_ep/hybrid_ep.cu
and executor/executor.cu, with --moe-permute-fusion-into-hybridep off (TransformerConfig default):

- _HybridEPManager.dispatch casts the router's probs to FP32 (``self.token_probs.float()``, HybridEP takes FP32
  probs; the router's are BF16 without --moe-router-dtype fp32): 1 kernel, and its cast back in backward.
- metadata_preprocessing all-gathers every rank's bool routing map over the EP group (Executor::
  allgather_routing_map: NCCL's all_gather_into_tensor across nodes, HybridEP's own NVLink kernel inside one),
  then runs the preprocess kernel over the gathered map, permute_preprocessing (the standalone permute's row-id
  map: reads the local experts' bool map of every token that may arrive, n x tokens x experts / n, and writes
  it as int32; extension/permute.cu) and pad_tokens_per_expert (3 kernels), and synchronizes the stream to read
  the token counts on the host (the MoE recipe's tokens_per_expert_sync). No backward.
- Across nodes Executor::dispatch_preprocess copies the tokens and the FP32 probs into the RDMA buffers
  (2 cudaMemcpyAsync); the dispatch that the combine's backward runs copies the gradient tokens (1).
"""

from __future__ import annotations

from workloads.dispatchers.base import ExpertSteps, MoeContext, TokenDispatcher, Wire
from workloads.dispatchers.steps import ep_collective, host_sync, permute, te_grouped_mlp, unpermute
from workloads.ops import (
    ALL_GATHER,
    ALL_TO_ALL,
    BYTES_BF16,
    BYTES_FP32,
    MEMORY,
    Group,
    Module,
    Step,
    Transport,
    comm_step,
)

PROBS_CAST_BYTES_PER_SCORE = BYTES_BF16 + BYTES_FP32  # read BF16, write FP32 (and back in backward)
PREPROCESS_KERNELS = 3  # the preprocess (scan) kernel, permute_preprocessing and pad_tokens_per_expert
ROW_ID_MAP_BYTES_PER_SCORE = 1 + 4  # permute_preprocessing: the bool map read, the int32 row-id map written


def hybridep_before_sync(ctx: MoeContext) -> list[Step]:
    """The probs cast, the routing-map all-gather and the preprocess kernels, before the token-count sync.

    The all-gather moves each rank's ``tokens`` x ``num_experts`` map (1 B per score) to the ``degree`` - 1
    others: each GPU sends (n - 1) maps; across N nodes NCCL's rings cross the node boundary at N of every n
    hops, so N/n of that egress leaves over the NIC (inside one node, all of it over NVLink)."""
    scores = ctx.tokens * ctx.num_experts
    n = ctx.degree
    egress = (n - 1) * scores
    nic = egress * ctx.nodes / n if ctx.nodes > 1 else 0.0
    return [
        Step(
            "hybridep_probs_fp32",
            MEMORY,
            mem_bytes=PROBS_CAST_BYTES_PER_SCORE * scores,
            bwd_mem_bytes=PROBS_CAST_BYTES_PER_SCORE * scores,
            module=Module.MOE,
        ),
        comm_step(
            "hybridep_routing_map_ag",
            ALL_GATHER,
            Group.EP,
            comm_bytes=egress - nic,
            nic_bytes=nic,
            group_size=n,
            bwd_kernels=0,
            module=Module.MOE,
            transport=Transport.NCCL,  # NCCL's all-gather (its ring rate and channels), not DeepEP's
        ),
        Step(
            "hybridep_preprocess",
            MEMORY,
            # the gathered map read, then the row-id map; the scan's per-token index outputs are not counted
            mem_bytes=n * scores + ROW_ID_MAP_BYTES_PER_SCORE * scores,
            kernels=PREPROCESS_KERNELS,
            bwd_kernels=0,
            module=Module.MOE,
        ),
    ]


def hybridep_staging(ctx: MoeContext) -> list[Step]:
    """Across nodes: the tokens (BF16) and FP32 probs copied into HybridEP's RDMA buffers before the dispatch."""
    if ctx.nodes <= 1:
        return []
    copied = ctx.tokens * ctx.hidden * BYTES_BF16 + ctx.tokens * ctx.num_experts * BYTES_FP32
    return [Step("hybridep_stage", MEMORY, mem_bytes=2 * copied, kernels=2, bwd_kernels=0, module=Module.MOE)]


def hybridep_grad_staging_bytes(ctx: MoeContext) -> float:
    """Bytes the combine's backward (a dispatch) copies into the RDMA buffers: the gradient tokens, read and
    written once (0 inside one node)."""
    return 2 * ctx.tokens * ctx.hidden * BYTES_BF16 if ctx.nodes > 1 else 0.0


class FlexHybridepDispatcher(TokenDispatcher):
    name = "flex-hybridep"
    megatron = "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep"

    wire = Wire.PER_RANK
    moved_by = Transport.HYBRIDEP

    def layer_steps(self, ctx: MoeContext, experts: ExpertSteps) -> list[Step]:
        return [
            *hybridep_before_sync(ctx),
            *host_sync(ctx),
            *hybridep_staging(ctx),
            permute(ctx),
            ep_collective(ctx, "ep_a2a_dispatch", ALL_TO_ALL, Transport.HYBRIDEP, dispatch=True),
            *experts.shared,
            # HybridEP pads each expert's rows to the quantization alignment inside its dispatch, so the experts
            # skip TEGroupedMLP's padding (NVIDIA/Megatron-LM@d98e8a64 moe_utils.py skip_routed_expert_padding,
            # since core_v0.18.0, #4636)
            *te_grouped_mlp(ctx, experts, padded=False),
            ep_collective(ctx, "ep_a2a_combine", ALL_TO_ALL, Transport.HYBRIDEP, dispatch=False),
            # the combine's backward is a HybridEP dispatch: its staging copy runs just before it
            unpermute(ctx, hybridep_grad_staging_bytes(ctx)),
        ]
