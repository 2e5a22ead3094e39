"""Forward recipes of the FFN of one layer per GPU: dense SwiGLU, or the MoE (EP or TP experts, shared experts).

EP bytes and expert GEMM rows come from one ``EpPlan`` (workloads/ep/plan.py): MegaScale-MoE Eq. 3 and its
all-gather switch inside a node, DeepEP's node-limited bytes across nodes, and skewed routing. All sizes
are per GPU, BF16 (2 bytes per element).
"""

from __future__ import annotations

import math

from workloads.ep.hybridep import hybridep_before_sync, hybridep_grad_staging_bytes, hybridep_staging
from workloads.ep.plan import EpPlan, ep_plan
from workloads.ops import (
    ALL_GATHER,
    ALL_TO_ALL,
    BYTES_BF16,
    GEMM,
    HOST_SYNC,
    MEMORY,
    MEMORY_BACKWARD_FACTOR,
    REDUCE_SCATTER,
    Carries,
    EpDispatcher,
    Gemm,
    GraphPart,
    Group,
    Module,
    Step,
    comm_step,
)
from workloads.recipes.activation import swiglu_step
from workloads.recipes.comm_pairs import tp_pair
from workloads.recipes.expert_kernels import clamp_steps, fc2_bias_steps
from workloads.recipes.router import aux_loss_steps, fused_topk_step, random_logits_step
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.routing import layout_routing_stats

# Unfused permutation and routing (Megatron-LM at the paper's commit): index expansion, separate gather,
# probability multiply and scatter kernels. Assumed: 4 kernels and 2 HBM passes where a fused kernel needs
# 1 and 1. (The activation's kernels are counted op by op: workloads/recipes/activation.py.)
UNFUSED_KERNELS = 4
UNFUSED_PASSES = 2
M = Module.MOE  # steps of the MoE layer (router, dispatch, experts, combine): --recompute-modules moe
SHARED = Module.SHARED_EXPERTS
ACT = Module.MOE_ACT
ROUTER = GraphPart.MOE_ROUTER  # the steps a "moe_router" CUDA-graph scope captures (workloads/specs/cuda_graphs.py)


def dispatch_uses_all_gather(model: ModelSpec, layout: LayoutSpec) -> bool:
    """Sec. 3.2: with top-k above the threshold, AG + local scatter beats the all-to-all."""
    return layout.ffn == "ep" and model.top_k > layout.a2a_topk_threshold


def layout_ep_plan(model: ModelSpec, layout: LayoutSpec, seq_len: int, gpus_per_node: int) -> EpPlan:
    """The EP plan of a layout's MoE layers for sequences of ``seq_len`` tokens (after CP)."""
    n, etp = layout.intra_size, layout.etp
    local = layout.micro_batch * seq_len // n
    degree = layout.ep_degree
    ranks_per_node = gpus_per_node // etp  # EP ranks per node (ETP groups inside the node)
    stats = None
    if layout.routing != "uniform" or layout.dropless or layout.expert_loads:
        stats = layout_routing_stats(
            model.num_experts,
            model.top_k,
            local,
            degree,
            layout.routing,
            layout.zipf_exponent,
            layout.seed,
            layout.dropless,
            layout.capacity_factor,
            layout.expert_loads,
        )
    return ep_plan(
        num_experts=model.num_experts,
        top_k=model.top_k,
        hidden_size=model.hidden_size,
        tokens_local=local,
        group_tokens=local * min(degree, ranks_per_node),
        degree=degree,
        ranks_per_node=ranks_per_node,
        etp=etp,
        all_gather=dispatch_uses_all_gather(model, layout),
        max_nodes=layout.ep_max_nodes,
        capacity_factor=layout.capacity_factor,
        dropless=layout.dropless,
        stats=stats,
        dispatcher=layout.ep_dispatcher,
    )


def host_sync_steps(layout: LayoutSpec) -> list[Step]:
    """Token counts per expert copied to the host before the expert GEMMs (Megatron-Core's dispatchers)."""
    return [Step("tokens_per_expert_sync", HOST_SYNC, module=Module.MOE)] if layout.host_sync_per_moe_layer else []


def _kernels_passes(layout: LayoutSpec) -> tuple[int, int]:
    return (1, 1) if layout.fused_permute else (UNFUSED_KERNELS, UNFUSED_PASSES)


def dense_ffn_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """A dense SwiGLU FFN of width dense_ffn_size: TP-split with AG/RS under TP attention, else replicated."""
    n, h, f = layout.intra_size, model.hidden_size, model.dense_ffn_size
    tokens = layout.micro_batch * seq_len
    local = tokens // layout.sequence_shards
    tp = layout.attention == "tp" and n > 1
    rows, width = (tokens, f // n) if tp else (local, f)
    gather, scatter = tp_pair("ffn", n, tokens * h * BYTES_BF16, Module.MLP, layout.sequence_parallel)
    return [
        Step("ffn_norm", MEMORY, mem_bytes=2 * local * h * BYTES_BF16, sar_recompute=True, module=Module.LAYERNORM),
        *([gather] if tp else []),
        Step("dense_fc13", GEMM, gemm=Gemm(rows, 2 * width, h), module=Module.MLP),
        swiglu_step("swiglu", rows * width, fused=layout.fused_activation, probs=False, module=Module.MLP),
        Step("dense_fc2", GEMM, gemm=Gemm(rows, h, width), module=Module.MLP),
        *([scatter] if tp else []),
    ]


def shared_expert_steps(model: ModelSpec, layout: LayoutSpec, local: int) -> list[Step]:
    """Shared experts on the GPU's own tokens, no dispatch; they run beside the dispatch (overlap_comm)."""
    if not model.shared_ffn_size:
        return []
    h, f = model.hidden_size, model.shared_ffn_size
    return [
        Step("shared_fc13", GEMM, gemm=Gemm(local, 2 * f, h), overlap_comm=True, module=SHARED),
        swiglu_step(
            "shared_swiglu", local * f, fused=layout.fused_activation, probs=False, module=SHARED, overlap_comm=True
        ),
        Step("shared_fc2", GEMM, gemm=Gemm(local, h, f), overlap_comm=True, module=SHARED),
    ]


def _router_steps(model: ModelSpec, layout: LayoutSpec, local: int) -> list[Step]:
    """Norm, gating GEMM and the router's kernels after it (workloads/recipes/router.py under Megatron-Core's flags)."""
    kernels, passes = _kernels_passes(layout)
    h = model.hidden_size
    scores = local * model.num_experts
    topk = Step(
        "router_topk",
        MEMORY,
        mem_bytes=passes * 3 * local * model.num_experts * 4,
        kernels=kernels,
        module=M,
        graph=ROUTER,
    )
    return [
        Step(
            "ffn_norm",
            MEMORY,
            mem_bytes=2 * local * h * BYTES_BF16,
            sar_recompute=True,
            module=Module.LAYERNORM,
            graph=ROUTER,
        ),
        Step("router", GEMM, gemm=Gemm(local, model.num_experts, h), bf16_only=True, module=M, graph=ROUTER),
        *(random_logits_step(scores) if layout.router_random_logits else []),
        fused_topk_step(scores) if layout.router_fusion else topk,
        *aux_loss_steps(layout, scores),
    ]


def _expert_steps(model: ModelSpec, layout: LayoutSpec, rows: int, groups: int, width: int, h: int) -> list[Step]:
    """The grouped (or per-expert) SwiGLU GEMMs on ``rows`` rows of each of ``groups`` experts, with the
    clamp and FC2 bias kernels of models that have them (workloads/recipes/expert_kernels.py)."""
    sequential = layout.expert_gemm == "sequential"
    # The host launches one GEMM per local expert unless one grouped kernel runs them all (layout.expert_gemm).
    launches = 1 if layout.expert_gemm == "grouped" else groups
    act = swiglu_step(
        "swiglu",
        rows * groups * width,
        fused=layout.fused_activation,
        probs=True,
        module=ACT,
        launches=groups if sequential else 1,  # SequentialMLP runs each local expert's MLP on its own
    )
    return [
        Step("expert_fc13", GEMM, gemm=Gemm(rows, 2 * width, h, groups, sequential), kernels=launches, module=M),
        *clamp_steps(model, rows * groups, width, ACT),
        act,
        Step("expert_fc2", GEMM, gemm=Gemm(rows, h, width, groups, sequential), kernels=launches, module=M),
        *fc2_bias_steps(model, rows * groups, groups, h, M),
    ]


def _permute_step(layout: LayoutSpec, copies: int, tokens: int, h: int) -> Step:
    """Token copies gathered into expert order before the expert GEMMs (read and written once per pass) from
    ``tokens`` rows. Its backward is the gather's transpose, a scatter-add: each copy's gradient read once and
    each token's gradient written once per pass (Megatron-Core moe_gather.backward, torch.zeros + scatter_add_,
    megatron/core/transformer/moe/moe_utils.py at f1f03922), not twice the forward's copies."""
    kernels, passes = _kernels_passes(layout)
    mem_bytes = passes * 2 * copies * h * BYTES_BF16
    bwd_mem_bytes = passes * (copies + tokens) * h * BYTES_BF16
    return Step(
        "permute",
        MEMORY,
        mem_bytes=mem_bytes,
        kernels=kernels,
        sar_recompute=True,
        routed_copies=True,
        module=M,
        bwd_mem_bytes=bwd_mem_bytes,
    )


def tp_experts_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """Every expert split n ways (Megatron-LM's TP experts): AG the tokens, all experts, RS (Eq. 4)."""
    n, h, k = layout.intra_size, model.hidden_size, model.top_k
    tokens = layout.micro_batch * seq_len
    local = tokens // n
    kernels, passes = _kernels_passes(layout)
    gathered = tokens * k
    gather, scatter = tp_pair("ffn", n, tokens * h * BYTES_BF16, Module.MOE)
    rows = math.ceil(gathered / model.num_experts * layout.capacity_factor)  # capacity-padded buffers
    return [
        *_router_steps(model, layout, local),
        *shared_expert_steps(model, layout, local),
        gather,
        *host_sync_steps(layout),
        _permute_step(layout, gathered, tokens, h),
        *_expert_steps(model, layout, rows, model.num_experts, model.expert_ffn_size // n, h),
        scatter,
        Step("unpermute", MEMORY, mem_bytes=passes * (gathered + local) * h * BYTES_BF16, kernels=kernels, module=M),
    ]


def ep_ffn_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int, gpus_per_node: int) -> list[Step]:
    """The MoE FFN with EP (in-node or across nodes), ETP, shared experts and skewed routing."""
    n, h, k, etp = layout.intra_size, model.hidden_size, model.top_k, layout.etp
    local = layout.micro_batch * seq_len // n
    plan = layout_ep_plan(model, layout, seq_len, gpus_per_node)
    kernels, passes = _kernels_passes(layout)
    shared = shared_expert_steps(model, layout, local)
    # Shared experts, not a fused GEMM, hide the dispatch; with ETP the ETP all-gather / reduce-scatter
    # take the fused slots next to the expert GEMMs and dispatch / combine run as plain collectives.
    fuse_dispatch = "" if shared or etp > 1 else "next"
    fuse_combine = "" if etp > 1 else "prev"
    kinds = (ALL_GATHER, REDUCE_SCATTER) if plan.all_gather else (ALL_TO_ALL, ALL_TO_ALL)
    names = ("ep_ag_dispatch", "ep_rs_combine") if plan.all_gather else ("ep_a2a_dispatch", "ep_a2a_combine")
    # group_size is every rank of the EP group, wherever it sits: a pairwise exchange takes one step per
    # peer (Thakur et al. 2005, Sec. 3.6), and counting only a node's members made one 64-rank exchange
    # cost 7 steps over 8 nodes but 63 in one node, so bigger nodes looked slower (issue #13).
    common = {"comm_bytes": plan.nvlink_bytes, "nic_bytes": plan.nic_bytes, "group_size": plan.degree}
    common["module"] = M
    common["dispatcher"] = EpDispatcher(plan.dispatcher)
    dispatch = comm_step(
        names[0],
        kinds[0],
        Group.EP,
        fuse=fuse_dispatch,
        sar_recompute=True,
        routed_copies=True,
        carries=Carries.INTO_GEMM,
        **common,
    )
    combine = comm_step(names[1], kinds[1], Group.EP, fuse=fuse_combine, carries=Carries.OUT_OF_GEMM, **common)
    etp_ag: list[Step] = []
    etp_rs: list[Step] = []
    if etp > 1:  # TP's Eq. 4 on the routed copies: AG + RS of the etp x routed buffer, (etp-1)/etp each
        etp_bytes = plan.routed_bytes * (etp - 1)
        etp_ag = [
            comm_step(
                "etp_ag",
                ALL_GATHER,
                Group.ETP,
                comm_bytes=etp_bytes,
                group_size=etp,
                fuse="" if shared else "next",
                sar_recompute=True,
                carries=Carries.INTO_GEMM,
                module=M,
            )
        ]
        etp_rs = [
            comm_step(
                "etp_rs",
                REDUCE_SCATTER,
                Group.ETP,
                comm_bytes=etp_bytes,
                group_size=etp,
                fuse="prev",
                carries=Carries.OUT_OF_GEMM,
                module=M,
            )
        ]
    routed = local * k
    hybridep = layout.flex_backend == "hybridep"
    unpermute_bytes = passes * (routed + local) * h * BYTES_BF16
    # the combine's backward is a HybridEP dispatch: its staging copy runs just before it (workloads/ep/hybridep.py)
    grad_staging = hybridep_grad_staging_bytes(plan, local, h) if hybridep else 0.0
    unpermute = Step(
        "unpermute",
        MEMORY,
        mem_bytes=unpermute_bytes,
        kernels=kernels,
        bwd_kernels=kernels + 1 if grad_staging else None,
        bwd_mem_bytes=MEMORY_BACKWARD_FACTOR * unpermute_bytes + grad_staging if grad_staging else None,
        module=M,
    )
    return [
        *_router_steps(model, layout, local),
        *(hybridep_before_sync(plan, local, model.num_experts) if hybridep else []),
        *host_sync_steps(layout),
        *(hybridep_staging(plan, local, model.num_experts, h) if hybridep else []),
        _permute_step(layout, routed, local, h),
        dispatch,
        *shared,
        *etp_ag,
        *_expert_steps(model, layout, plan.rows_per_expert, plan.experts_local, model.expert_ffn_size // etp, h),
        *etp_rs,
        combine,
        unpermute,
    ]


def ffn_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int, gpus_per_node: int, dense: bool) -> list[Step]:
    """The FFN of one layer: dense, or the MoE with EP or TP experts."""
    if dense:
        return dense_ffn_recipe(model, layout, seq_len)
    if layout.ffn == "ep":
        return ep_ffn_recipe(model, layout, seq_len, gpus_per_node)
    return tp_experts_recipe(model, layout, seq_len)
