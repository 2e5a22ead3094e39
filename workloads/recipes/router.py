"""The kernels of Megatron-Core's TopKRouter after its gating GEMM: memory-bound steps with their bytes and launches.

Counted from the code the Megatron-Bridge 26.06 recipes run (Megatron-Core core_v0.18.0, commit ba7b5eb:
megatron/core/transformer/moe/router.py TopKRouter.forward / routing, moe_utils.py; Transformer Engine
4220403, v2.16, the TE the Megatron-Bridge v0.5.0 pyproject pins: transformer_engine/pytorch/router.py,
pytorch/csrc/extensions/router.cpp, common/fused_router/*.cu). Sizes per GPU: ``tokens`` x ``experts`` router
scores; the logits are BF16 (the input's dtype without --moe-router-dtype, TopKRouter.gating), TE's
intermediate and aux-loss scores FP32, routing maps bool. Scalars (the loss, its logging) move no bytes that
count. Without --moe-router-fusion the top-k keeps moesim's former assumption (workloads/recipes/moe.py
UNFUSED_KERNELS) and the aux loss is not declared.
"""

from __future__ import annotations

from workloads.ops import BYTES_BF16, BYTES_FP32, MEMORY, GraphPart, Module, Step
from workloads.specs.layouts import LayoutSpec

BYTES_BOOL = 1
ROUTER = GraphPart.MOE_ROUTER  # a "moe_router" CUDA-graph scope captures these (workloads/specs/cuda_graphs.py)

# --moe-router-force-load-balancing (moe_utils.py RandomSTE.forward): ``logits.clone().normal_()``, a copy
# (read + write) and a fill with Gaussian noise (write) of the logits: 2 kernels. Its backward returns the
# output gradient as it is: no kernel.
RANDOM_LOGITS_KERNELS = 2
RANDOM_LOGITS_BYTES_PER_SCORE = 3 * BYTES_BF16

# --moe-router-fusion, top-k (moe_utils.py topk_routing_with_score_function -> TE fused_topk_with_score_function):
# one kernel each way. Forward reads the logits and writes probs (BF16), the routing map (bool) and TE's FP32
# intermediate (router.cpp fused_topk_with_score_function_fwd allocates the three with at::empty, so the kernel
# writes every element); backward reads the map, the intermediate and the probs' gradient and writes the
# logits' gradient (BF16).
FUSED_TOPK_BYTES_PER_SCORE = BYTES_BF16 + BYTES_BF16 + BYTES_BOOL + BYTES_FP32
FUSED_TOPK_BWD_BYTES_PER_SCORE = BYTES_BOOL + BYTES_FP32 + BYTES_BF16 + BYTES_BF16

# --moe-router-load-balancing-type aux_loss with --moe-aux-loss-coeff > 0, fused (router.py _apply_aux_loss):
# forward 7 launches:
#   fused_compute_score_for_moe_aux_loss, 1 kernel: reads the logits, writes FP32 scores, a bool map and an
#     FP32 intermediate (fused_score_for_moe_aux_loss.cu);
#   get_tokens_per_expert_and_token_count: routing_map.sum(dim=0), 1 kernel reading the bool map (its
#     reduction over the TP x CP group is a no-op at TP = CP = 1, and a collective otherwise: not declared);
#   fused_moe_aux_loss, 3 launches: a cudaMemsetAsync of the accumulator, the loss kernel reading the FP32
#     scores, and a 1-thread convert_accum_to_output kernel (fused_moe_aux_loss.cu);
#   attach_and_log_load_balancing_loss: MoEMetricsTracker.record's ``aux_loss / coeff`` and
#     ``values[layer - 1] += value`` (moe_logging.py), 2 kernels on scalars.
# Backward 5 kernels: MoEAuxLossAutoScaler.backward's ``torch.ones_like(aux_loss) * scale`` (2, scalars); TE
# FusedAuxLoss backward writing the FP32 gradient of the scores (1); FusedComputeScoresForMoEAuxLoss backward
# reading it and the intermediate, writing a BF16 logits gradient (1); autograd's sum of the two logits
# gradients (top-k and aux-loss branches: reads 2, writes 1 BF16 tensor) (1).
AUX_LOSS_KERNELS = 7
AUX_LOSS_BYTES_PER_SCORE = (BYTES_BF16 + BYTES_FP32 + BYTES_BOOL + BYTES_FP32) + BYTES_BOOL + BYTES_FP32
AUX_LOSS_BWD_KERNELS = 5
AUX_LOSS_BWD_BYTES_PER_SCORE = BYTES_FP32 + (2 * BYTES_FP32 + BYTES_BF16) + 3 * BYTES_BF16


def random_logits_step(scores: int) -> list[Step]:
    """Megatron's benchmark routing (--moe-router-force-load-balancing): the logits replaced by noise."""
    return [
        Step(
            "router_random_logits",
            MEMORY,
            mem_bytes=RANDOM_LOGITS_BYTES_PER_SCORE * scores,
            kernels=RANDOM_LOGITS_KERNELS,
            bwd_kernels=0,
            module=Module.MOE,
            graph=ROUTER,
        )
    ]


def fused_topk_step(scores: int) -> Step:
    """TE's fused score function and top-k (--moe-router-fusion)."""
    return Step(
        "router_topk",
        MEMORY,
        mem_bytes=FUSED_TOPK_BYTES_PER_SCORE * scores,
        bwd_mem_bytes=FUSED_TOPK_BWD_BYTES_PER_SCORE * scores,
        module=Module.MOE,
        graph=ROUTER,
    )


def aux_loss_steps(layout: LayoutSpec, scores: int) -> list[Step]:
    """The load-balancing loss of the fused router (Switch Transformer's, per micro-batch)."""
    if not (layout.router_aux_loss and layout.router_fusion):
        return []
    return [
        Step(
            "router_aux_loss",
            MEMORY,
            mem_bytes=AUX_LOSS_BYTES_PER_SCORE * scores,
            kernels=AUX_LOSS_KERNELS,
            bwd_mem_bytes=AUX_LOSS_BWD_BYTES_PER_SCORE * scores,
            bwd_kernels=AUX_LOSS_BWD_KERNELS,
            module=Module.MOE,
            graph=ROUTER,
        )
    ]
