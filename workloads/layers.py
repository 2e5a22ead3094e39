"""Forward recipes of one MoE transformer layer per GPU, for each intra-node layout.

Shapes follow MegaScale-MoE Fig. 9 (SP+EP) and Megatron-LM's TP with sequence parallelism; byte counts
follow the paper's Eq. 1-4. All sizes are per GPU, BF16 (2 bytes per element).
"""

from __future__ import annotations

import math

from workloads.layouts import LayoutSpec
from workloads.models import ModelSpec
from workloads.ops import (
    ALL_GATHER,
    ALL_TO_ALL,
    ATTENTION,
    BYTES_BF16,
    GEMM,
    HOST_SYNC,
    MEMORY,
    REDUCE_SCATTER,
    Gemm,
    Step,
    comm_step,
)

# Unfused permutation / routing / activation (Megatron-LM at the paper's commit): index expansion,
# separate gather, probability multiply and scatter kernels. Assumed: 4 kernels and 2 HBM passes where
# a fused kernel needs 1 and 1.
UNFUSED_KERNELS = 4
UNFUSED_PASSES = 2


def dispatch_uses_all_gather(model: ModelSpec, layout: LayoutSpec) -> bool:
    """Sec. 3.2: with top-k above the threshold, AG + local scatter beats the all-to-all."""
    return layout.ffn == "ep" and model.top_k > layout.a2a_topk_threshold


def ep_collectives(
    all_gather: bool,
    group_bytes: float,
    routed_bytes: float,
    g: int,
    fuse_dispatch: str = "next",
    fuse_combine: str = "prev",
) -> tuple[Step, Step]:
    """Dispatch and combine inside an EP group of g GPUs (MegaScale-MoE Sec. 3.2).

    All-to-all (Eq. 3): (g-1)/g of the ``routed_bytes`` of token copies this GPU sends; with top-k above
    the threshold, all-gather + reduce-scatter of the g members' tokens (``group_bytes``) instead.
    """
    if all_gather:
        egress = group_bytes * (g - 1) / g
        names, kinds = ("ep_ag_dispatch", "ep_rs_combine"), (ALL_GATHER, REDUCE_SCATTER)
    else:
        egress = routed_bytes * (g - 1) / g
        names, kinds = ("ep_a2a_dispatch", "ep_a2a_combine"), (ALL_TO_ALL, ALL_TO_ALL)
    dispatch = comm_step(
        names[0], kinds[0], "ep", comm_bytes=egress, group_size=g, fuse=fuse_dispatch, sar_recompute=True
    )
    combine = comm_step(names[1], kinds[1], "ep", comm_bytes=egress, group_size=g, fuse=fuse_combine)
    return dispatch, combine


def host_sync_steps(layout: LayoutSpec) -> list[Step]:
    """Token counts per expert copied to the host before the expert GEMMs (Megatron-Core's dispatchers)."""
    return [Step("tokens_per_expert_sync", HOST_SYNC)] if layout.host_sync_per_moe_layer else []


def attention_flops(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> float:
    """Forward attention FLOPs per GPU: QK^T and AV over the full sequence for heads/n heads.

    Counted without the causal half (FlashAttention's and Megatron's convention); the kernel executes
    about half of them under the causal mask (see simulator.costs).
    """
    heads_local = model.num_heads / layout.intra_size
    return 4.0 * layout.micro_batch * seq_len * seq_len * model.head_dim * heads_local


def attention_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Norm, QKV projection, FlashAttention, output projection, residual: TP or Ulysses SP."""
    n, h = layout.intra_size, model.hidden_size
    tokens = layout.micro_batch * seq_len
    local = tokens // n  # sequence-sharded tokens per GPU
    act_local = local * h * BYTES_BF16  # one [b, s/n, h] activation
    norm = Step("attn_norm", MEMORY, mem_bytes=2 * act_local, sar_recompute=True)
    residual = Step("attn_residual", MEMORY, mem_bytes=3 * act_local)
    flash = Step("flash_attn", ATTENTION, flops=attention_flops(model, layout, seq_len))
    if layout.attention == "sp":
        qkv_bytes = local * model.qkv_width * BYTES_BF16
        return [
            norm,
            Step("qkv_proj", GEMM, gemm=Gemm(local, model.qkv_width, h)),
            # Eq. 2: Q, K, V to head-sharded layout; (n-1)/n of the buffer leaves the GPU
            comm_step("sp_a2a_qkv", ALL_TO_ALL, "sp", comm_bytes=qkv_bytes * (n - 1) / n, fuse="prev"),
            flash,
            comm_step("sp_a2a_out", ALL_TO_ALL, "sp", comm_bytes=act_local * (n - 1) / n, fuse="next"),
            Step("o_proj", GEMM, gemm=Gemm(local, h, h)),
            residual,
        ]
    full = tokens * h * BYTES_BF16
    return [
        norm,
        # Eq. 1: all-gather the sequence-sharded input, reduce-scatter the output
        comm_step("tp_ag_attn", ALL_GATHER, "tp", comm_bytes=full * (n - 1) / n, fuse="next", sar_recompute=True),
        Step("qkv_proj", GEMM, gemm=Gemm(tokens, model.qkv_width // n, h)),
        flash,
        Step("o_proj", GEMM, gemm=Gemm(tokens, h, h // n)),
        comm_step("tp_rs_attn", REDUCE_SCATTER, "tp", comm_bytes=full * (n - 1) / n, fuse="prev"),
        residual,
    ]


def ffn_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Router, dispatch, grouped expert GEMMs (SwiGLU), combine: EP or TP experts."""
    n, h, k, f = layout.intra_size, model.hidden_size, model.top_k, model.expert_ffn_size
    tokens = layout.micro_batch * seq_len
    local = tokens // n
    fused = layout.fused_permute
    kernels = 1 if fused else UNFUSED_KERNELS
    passes = 1 if fused else UNFUSED_PASSES
    steps: list[Step] = [
        Step("ffn_norm", MEMORY, mem_bytes=2 * local * h * BYTES_BF16, sar_recompute=True),
        Step("router", GEMM, gemm=Gemm(local, model.num_experts, h)),
        Step("router_topk", MEMORY, mem_bytes=passes * 3 * local * model.num_experts * 4, kernels=kernels),
    ]
    if layout.ffn == "ep":
        experts_local = model.num_experts // n
        routed = local * k  # token copies this GPU sends; balanced routing receives as many
        routed_bytes = routed * h * BYTES_BF16
        dispatch, combine = ep_collectives(
            dispatch_uses_all_gather(model, layout), tokens * h * BYTES_BF16, routed_bytes, n
        )
        groups, width, gathered = experts_local, f, routed
        steps += host_sync_steps(layout) + [
            Step("permute", MEMORY, mem_bytes=passes * 2 * routed_bytes, kernels=kernels, sar_recompute=True),
            dispatch,
        ]
    else:
        full = tokens * h * BYTES_BF16
        groups, width, gathered = model.num_experts, f // n, tokens * k
        steps.append(
            comm_step("tp_ag_ffn", ALL_GATHER, "tp", comm_bytes=full * (n - 1) / n, fuse="next", sar_recompute=True)
        )
        steps += host_sync_steps(layout)
        steps.append(
            Step(
                "permute", MEMORY, mem_bytes=passes * 2 * gathered * h * BYTES_BF16, kernels=kernels, sar_recompute=True
            )
        )
        combine = comm_step("tp_rs_ffn", REDUCE_SCATTER, "tp", comm_bytes=full * (n - 1) / n, fuse="prev")
    # Expert GEMMs run on capacity-padded buffers: capacity = cf x balanced tokens per expert.
    per_expert = math.ceil(gathered / groups * layout.capacity_factor)
    sequential = layout.expert_gemm == "sequential"
    slots = per_expert * groups
    steps += [
        Step("expert_fc13", GEMM, gemm=Gemm(per_expert, 2 * width, h, groups, sequential)),
        Step("swiglu", MEMORY, mem_bytes=passes * 3 * slots * width * BYTES_BF16, kernels=kernels),
        Step("expert_fc2", GEMM, gemm=Gemm(per_expert, h, width, groups, sequential)),
        combine,
        Step("unpermute", MEMORY, mem_bytes=passes * (gathered + local) * h * BYTES_BF16, kernels=kernels),
    ]
    return steps


def layer_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """The forward steps of one transformer layer on one GPU."""
    return attention_recipe(model, layout, seq_len) + ffn_recipe(model, layout, seq_len)


def embedding_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Token embedding lookup on the first stage (sequence-sharded)."""
    local = layout.micro_batch * seq_len // layout.intra_size
    return [Step("embedding", MEMORY, mem_bytes=2 * local * model.hidden_size * BYTES_BF16)]


def head_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Final norm, output projection over the vocabulary and cross-entropy on the last stage."""
    local = layout.micro_batch * seq_len // layout.intra_size
    logits_bytes = local * model.vocab_size * 4
    return [
        Step("final_norm", MEMORY, mem_bytes=2 * local * model.hidden_size * BYTES_BF16),
        Step("lm_head", GEMM, gemm=Gemm(local, model.vocab_size, model.hidden_size)),
        Step("cross_entropy", MEMORY, mem_bytes=3 * logits_bytes),
    ]


def paper_volumes_bytes(model: ModelSpec, n: int, micro_batch: int, seq_len: int) -> dict[str, float]:
    """The paper's per-GPU, per-layer forward volumes (Eq. 1-4), in bytes (BF16).

    Eq. 2 as printed is twice the egress of Ulysses' two all-to-alls (Q/K/V in, output back:
    (2 + 2/m) bsh/n elements x (n-1)/n); the simulator moves the physical bytes, i.e. half of Eq. 2.
    Eq. 1, 3 and 4 equal the physical egress of AG + RS and of dispatch + combine.
    """
    activation = micro_batch * seq_len * model.hidden_size * BYTES_BF16  # bsh in bytes
    tp = 2 * activation * (n - 1) / n  # Eq. 1 and Eq. 4
    return {
        "activation": activation,
        "tp_attention": tp,
        "sp_attention": tp * (2 + 2 / model.q_per_kv) / n,  # Eq. 2
        "ep_ffn_all_to_all": model.top_k / n * tp,  # Eq. 3
        "tp_ffn": tp,  # Eq. 4
        "dispatch_per_token": model.top_k * model.hidden_size * BYTES_BF16,
    }
