"""Beyond-the-paper layer recipes: dense FFN layers, shared experts, cross-node EP, skewed routing, FP8.

The paper's presets keep workloads.layers' recipes untouched; ``is_extended`` says when these apply.
"""

from __future__ import annotations

import math
from dataclasses import replace

from topologies.errors import ConfigError
from workloads.cp import apply_cp, to_fp8_comm
from workloads.ep import ep_dispatch_bytes
from workloads.layers import (
    BYTES_BF16,
    UNFUSED_KERNELS,
    UNFUSED_PASSES,
    attention_recipe,
    dispatch_uses_all_gather,
    ep_collectives,
    ffn_recipe,
    host_sync_steps,
)
from workloads.layouts import LayoutSpec
from workloads.mla import mla_recipe
from workloads.models import ModelSpec
from workloads.ops import ALL_GATHER, ALL_TO_ALL, GEMM, MEMORY, REDUCE_SCATTER, Gemm, Step, comm_step
from workloads.routing import ROUTINGS, layout_routing_stats

GEMM_DTYPES = ("bf16", "fp8")
FP8_EXCLUDED = ("router", "lm_head")  # DeepSeek-V3 Sec. 3.3.1: gating and output head stay in BF16


def ep_degree(layout: LayoutSpec) -> int:
    """The EP degree: ``layout.ep``, or intra_size when unset (in-node EP, the paper's)."""
    return layout.ep or layout.intra_size


def is_extended(model: ModelSpec, layout: LayoutSpec) -> bool:
    """True when the model or layout uses a feature the paper's recipes do not cover."""
    return (
        model.attention == "mla"
        or model.num_dense_layers > 0
        or model.num_shared_experts > 0
        or ep_degree(layout) != layout.intra_size
        or layout.routing != "uniform"
        or layout.dropless
        or bool(layout.expert_loads)
        or layout.gemm_dtype != "bf16"
        or layout.uneven_pp
        or layout.cp > 1
        or layout.etp > 1
        or layout.comm_dtype != "bf16"
    )


def validate_extensions(model: ModelSpec, layout: LayoutSpec, num_gpus: int, gpus_per_node: int) -> None:
    """Raise ConfigError for bad beyond-the-paper layout fields."""
    if layout.routing not in ROUTINGS:
        raise ConfigError("layout.routing", f"must be one of {', '.join(ROUTINGS)}")
    if layout.gemm_dtype not in GEMM_DTYPES:
        raise ConfigError("layout.gemm_dtype", f"must be one of {', '.join(GEMM_DTYPES)}")
    if layout.ep < 0 or layout.ep_max_nodes < 0:
        raise ConfigError("layout.ep", "ep and ep_max_nodes must be >= 0")
    if layout.zipf_exponent < 0:
        raise ConfigError("layout.zipf_exponent", "must be >= 0")
    if layout.expert_loads and (
        len(layout.expert_loads) != model.num_experts or min(layout.expert_loads) < 0 or sum(layout.expert_loads) <= 0
    ):
        raise ConfigError("layout.expert_loads", f"must be {model.num_experts} non-negative loads, not all 0")
    if layout.seed < 0:
        raise ConfigError("layout.seed", f"must be >= 0, got {layout.seed}")
    if layout.ffn != "ep":
        routed = layout.routing != "uniform" or layout.dropless or layout.expert_loads or layout.ep
        if routed:
            raise ConfigError("layout.ffn", "routing skew, dropless, expert_loads and ep need ffn: ep")
    ep, n, etp = ep_degree(layout), layout.intra_size, layout.etp
    if layout.etp > 1 and layout.ffn != "ep":
        raise ConfigError("layout.etp", 'expert-tensor parallelism needs ffn "ep" (ffn "tp" already splits experts)')
    if etp > 1 and (gpus_per_node % etp or model.expert_ffn_size % etp):
        raise ConfigError("layout.etp", f"ETP {etp} must divide the {gpus_per_node} GPUs of a node and expert_ffn_size")
    if (ep == n and etp == 1) or layout.ffn != "ep":
        return
    per_node = gpus_per_node // etp  # EP ranks per node: ETP groups sit inside the node (Megatron's order)
    if (ep * etp) % n or (num_gpus // layout.pp) % (ep * etp):
        raise ConfigError(
            "layout.ep", f"EP {ep} x ETP {etp} must be a multiple of intra_size {n} and divide GPUs per stage"
        )
    if model.num_experts % ep:
        raise ConfigError("model.num_experts", f"{model.num_experts} experts not divisible by EP degree {ep}")
    if ep > per_node and ep % per_node:
        raise ConfigError("layout.ep", f"cross-node EP {ep} must be a multiple of {per_node} EP ranks per node")
    if ep < per_node and per_node % ep:
        raise ConfigError("layout.ep", f"in-node EP {ep} must divide the {per_node} EP ranks of a node")
    nodes = max(ep // per_node, 1)
    reachable = model.num_experts // nodes * (min(layout.ep_max_nodes, nodes) if layout.ep_max_nodes else nodes)
    if model.top_k > reachable:
        raise ConfigError(
            "layout.ep_max_nodes", f"top_k {model.top_k} exceeds the {reachable} experts a token may reach"
        )


def to_fp8(steps: list[Step]) -> list[Step]:
    """Mark the linear-layer GEMMs FP8 (DeepSeek-V3 Sec. 3.3); attention and excluded GEMMs stay BF16."""
    return [
        replace(s, gemm=replace(s.gemm, fp8=True)) if s.kind == GEMM and s.name not in FP8_EXCLUDED else s
        for s in steps
    ]


def ext_attention_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """GQA (the paper's recipe) or MLA attention."""
    return mla_recipe(model, layout, seq_len) if model.attention == "mla" else attention_recipe(model, layout, seq_len)


def dense_ffn_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """A dense SwiGLU FFN of width dense_ffn_size: TP-split with AG/RS under TP attention, else replicated."""
    n, h, f = layout.intra_size, model.hidden_size, model.dense_ffn_size
    tokens = layout.micro_batch * seq_len
    local = tokens // n
    tp = layout.attention == "tp" and n > 1
    rows, width = (tokens, f // n) if tp else (local, f)
    full = tokens * h * BYTES_BF16
    steps = [Step("ffn_norm", MEMORY, mem_bytes=2 * local * h * BYTES_BF16, sar_recompute=True)]
    if tp:
        steps.append(
            comm_step("tp_ag_ffn", ALL_GATHER, "tp", comm_bytes=full * (n - 1) / n, fuse="next", sar_recompute=True)
        )
    steps += [
        Step("dense_fc13", GEMM, gemm=Gemm(rows, 2 * width, h)),
        Step("swiglu", MEMORY, mem_bytes=3 * rows * width * BYTES_BF16),
        Step("dense_fc2", GEMM, gemm=Gemm(rows, h, width)),
    ]
    if tp:
        steps.append(comm_step("tp_rs_ffn", REDUCE_SCATTER, "tp", comm_bytes=full * (n - 1) / n, fuse="prev"))
    return steps


def shared_expert_steps(model: ModelSpec, local: int) -> list[Step]:
    """Shared experts on the GPU's own tokens, no dispatch; they run beside the dispatch (overlap_comm)."""
    h, f = model.hidden_size, model.num_shared_experts * model.expert_ffn_size
    return [
        Step("shared_fc13", GEMM, gemm=Gemm(local, 2 * f, h), overlap_comm=True),
        Step("shared_swiglu", MEMORY, mem_bytes=3 * local * f * BYTES_BF16, overlap_comm=True),
        Step("shared_fc2", GEMM, gemm=Gemm(local, h, f), overlap_comm=True),
    ]


def ep_ffn_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int, gpus_per_node: int) -> list[Step]:
    """The MoE FFN with EP degree ep (in-node or across nodes), shared experts and skewed routing."""
    if layout.ffn != "ep":
        steps = ffn_recipe(model, layout, seq_len)
        return (
            steps[:3] + shared_expert_steps(model, layout.micro_batch * seq_len // layout.intra_size) + steps[3:]
            if model.num_shared_experts
            else steps
        )
    n, h, k, etp = layout.intra_size, model.hidden_size, model.top_k, layout.etp
    f = model.expert_ffn_size // etp  # ETP: each GPU holds 1/etp of every local expert's width
    ep = ep_degree(layout)
    gpus_per_node //= etp  # EP ranks per node (ETP groups inside the node)
    g = min(ep, gpus_per_node)  # EP members per node
    local = layout.micro_batch * seq_len // n
    kernels, passes = (1, 1) if layout.fused_permute else (UNFUSED_KERNELS, UNFUSED_PASSES)
    experts_local = model.num_experts // ep
    routed = local * k
    routed_bytes = routed * h * BYTES_BF16
    # ETP all-gathers the etp members' received copies: each expert's GEMM sees etp x the rows
    scale, per_expert = 1.0, math.ceil(routed * etp / experts_local * layout.capacity_factor)
    if layout.routing != "uniform" or layout.dropless or layout.expert_loads:
        stats = layout_routing_stats(
            model.num_experts,
            k,
            local,
            ep,
            layout.routing,
            layout.zipf_exponent,
            layout.seed,
            layout.dropless,
            layout.capacity_factor,
            layout.expert_loads,
        )
        scale = stats.comm_scale
        if layout.dropless:  # no padding: the busiest GPU's received copies, spread over its experts
            per_expert = math.ceil(stats.busiest_copies * etp / experts_local)
    shared = shared_expert_steps(model, local) if model.num_shared_experts else []
    # Shared experts, not a fused GEMM, hide the dispatch; with ETP the ETP all-gather / reduce-scatter
    # take the fused slots next to the expert GEMMs and dispatch / combine run as plain collectives.
    fuse_dispatch = "" if shared or etp > 1 else "next"
    fuse_combine = "" if etp > 1 else "prev"
    if ep > g:  # across nodes: DeepEP all-to-all, NIC once per remote node + NVLink fan-out
        ep_bytes = ep_dispatch_bytes(local, h, k, model.num_experts, ep, gpus_per_node, layout.ep_max_nodes)
        nvl, nic = ep_bytes.nvlink_bytes * scale, ep_bytes.nic_bytes * scale
        dispatch = comm_step(
            "ep_a2a_dispatch",
            ALL_TO_ALL,
            "ep",
            comm_bytes=nvl,
            nic_bytes=nic,
            group_size=g,
            fuse=fuse_dispatch,
            sar_recompute=True,
        )
        combine = comm_step(
            "ep_a2a_combine", ALL_TO_ALL, "ep", comm_bytes=nvl, nic_bytes=nic, group_size=g, fuse=fuse_combine
        )
    else:  # inside the node: MegaScale-MoE Eq. 3 (or AG/RS) with the EP degree g, scaled to the busiest GPU
        group_bytes = layout.micro_batch * seq_len * h * BYTES_BF16 * g / n  # the g members' tokens
        dispatch, combine = ep_collectives(
            dispatch_uses_all_gather(model, layout), group_bytes, routed_bytes * scale, g, fuse_dispatch, fuse_combine
        )
    sequential = layout.expert_gemm == "sequential"
    slots = per_expert * experts_local
    etp_ag: list[Step] = []
    etp_rs: list[Step] = []
    if etp > 1:  # TP's Eq. 4 on the routed copies: AG + RS of the etp x routed buffer, (etp-1)/etp each
        etp_bytes = routed_bytes * scale * (etp - 1)
        etp_ag = [
            comm_step(
                "etp_ag",
                ALL_GATHER,
                "ep",
                comm_bytes=etp_bytes,
                group_size=etp,
                fuse="" if shared else "next",
                sar_recompute=True,
            )
        ]
        etp_rs = [comm_step("etp_rs", REDUCE_SCATTER, "ep", comm_bytes=etp_bytes, group_size=etp, fuse="prev")]
    return [
        Step("ffn_norm", MEMORY, mem_bytes=2 * local * h * BYTES_BF16, sar_recompute=True),
        Step("router", GEMM, gemm=Gemm(local, model.num_experts, h)),
        Step("router_topk", MEMORY, mem_bytes=passes * 3 * local * model.num_experts * 4, kernels=kernels),
        *host_sync_steps(layout),
        Step("permute", MEMORY, mem_bytes=passes * 2 * routed_bytes, kernels=kernels, sar_recompute=True),
        dispatch,
        *shared,
        *etp_ag,
        Step("expert_fc13", GEMM, gemm=Gemm(per_expert, 2 * f, h, experts_local, sequential)),
        Step("swiglu", MEMORY, mem_bytes=passes * 3 * slots * f * BYTES_BF16, kernels=kernels),
        Step("expert_fc2", GEMM, gemm=Gemm(per_expert, h, f, experts_local, sequential)),
        *etp_rs,
        combine,
        Step("unpermute", MEMORY, mem_bytes=passes * (routed + local) * h * BYTES_BF16, kernels=kernels),
    ]


def ext_layer_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int, gpus_per_node: int, dense: bool) -> list[Step]:
    """The forward steps of one (dense or MoE) layer on one GPU: CP, GEMM and communication precision."""
    local_seq = seq_len // layout.cp  # CP: every op but attention sees the GPU's s/cp tokens (workloads/cp.py)
    ffn = (
        dense_ffn_recipe(model, layout, local_seq) if dense else ep_ffn_recipe(model, layout, local_seq, gpus_per_node)
    )
    attention = apply_cp(ext_attention_recipe(model, layout, local_seq), model, layout, seq_len, gpus_per_node)
    steps = attention + ffn
    steps = to_fp8(steps) if layout.gemm_dtype == "fp8" else steps
    return to_fp8_comm(steps) if layout.comm_dtype == "fp8" else steps
