"""Forward recipes of the FFN of one layer per GPU: a dense FFN (SwiGLU, or a plain MLP), or the MoE (EP or TP
experts, shared experts; a latent MoE's projections).

EP bytes and expert GEMM rows come from one ``EpPlan`` (workloads/ep/plan.py): MegaScale-MoE Eq. 3 and its
all-gather switch inside a node, DeepEP's node-limited bytes across nodes, and skewed routing. All sizes
are per GPU, BF16 (2 bytes per element).
"""

from __future__ import annotations

import math
from dataclasses import replace

from workloads.dispatchers.base import ExpertSteps, MoeContext, Wire
from workloads.dispatchers.registry import DISPATCHERS
from workloads.dispatchers.steps import UNFUSED_KERNELS, UNFUSED_PASSES
from workloads.ep.plan import EpPlan, ep_plan
from workloads.ops import (
    ALL_GATHER,
    BYTES_BF16,
    GEMM,
    HOST_SYNC,
    MEMORY,
    REDUCE_SCATTER,
    Carries,
    Gemm,
    GraphPart,
    Group,
    Module,
    Step,
    comm_step,
)
from workloads.recipes.activation import activation_step
from workloads.recipes.comm_pairs import tp_pair
from workloads.recipes.expert_kernels import clamp_steps, fc2_bias_steps
from workloads.recipes.norms import norm_step
from workloads.recipes.residual import input_grad_sums
from workloads.recipes.router import aux_loss_steps, fused_topk_step, random_logits_step
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.routing import layout_routing_stats

# The unfused permutation's and router's kernels and passes (UNFUSED_KERNELS, UNFUSED_PASSES) are the token
# dispatchers' (workloads/dispatchers/steps.py); the activation's are counted op by op (recipes/activation.py).
M = Module.MOE  # steps of the MoE layer (router, dispatch, experts, combine): --recompute-modules moe
SHARED = Module.SHARED_EXPERTS
ACT = Module.MOE_ACT
ROUTER = GraphPart.MOE_ROUTER  # the steps a "moe_router" CUDA-graph scope captures (workloads/specs/cuda_graphs.py)


def dispatch_uses_all_gather(model: ModelSpec, layout: LayoutSpec) -> bool:
    """Whether the layout's token dispatcher all-gathers the tokens: Megatron-Core's allgather dispatcher, or
    MegaScale-MoE's with top-k above the threshold (Sec. 3.2: AG + local scatter beats the all-to-all)."""
    dispatcher = DISPATCHERS[layout.token_dispatcher]
    return layout.ffn == "ep" and dispatcher.in_node_wire(model.top_k, layout.a2a_topk_threshold) == Wire.ALL_GATHER


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
        hidden_size=model.routed_width,
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
        dispatcher=layout.token_dispatcher,
        routing=layout.routing,
    )


def host_sync_steps(layout: LayoutSpec) -> list[Step]:
    """Token counts per expert copied to the host before the expert GEMMs (Megatron-Core's dispatchers)."""
    return [Step("tokens_per_expert_sync", HOST_SYNC, module=Module.MOE)] if layout.host_sync_per_moe_layer else []


def _kernels_passes(layout: LayoutSpec) -> tuple[int, int]:
    return (1, 1) if layout.fused_permute else (UNFUSED_KERNELS, UNFUSED_PASSES)


def dense_ffn_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> list[Step]:
    """A dense FFN of width dense_ffn_size: TP-split with AG/RS under TP attention, else replicated."""
    n, h, f = layout.intra_size, model.hidden_size, model.dense_ffn_size
    tokens = layout.micro_batch * seq_len
    local = tokens // layout.sequence_shards
    tp = layout.attention == "tp" and n > 1
    rows, width = (tokens, f // n) if tp else (local, f)
    gather, scatter = tp_pair("ffn", n, tokens * h * BYTES_BF16, Module.MLP, layout.sequence_parallel)
    return [
        norm_step("ffn_norm", local * h * BYTES_BF16, sar_recompute=True, module=Module.LAYERNORM),
        *([gather] if tp else []),
        # linear_fc1 is TELayerNormColumnParallelLinear where TE fuses the norm (NVIDIA/Megatron-LM@d98e8a64
        # megatron/core/models/gpt/gpt_layer_specs.py get_mlp_module_spec_for_backend, fuse_layernorm_and_linear)
        Step("dense_fc13", GEMM, gemm=Gemm(rows, model.fc1_widths * width, h), module=Module.MLP, norm_input=True),
        activation_step(
            model.ffn_activation,
            rows * width,
            gated=model.gated_ffn,
            fused=layout.fused_activation,
            probs=False,
            module=Module.MLP,
        ),
        Step("dense_fc2", GEMM, gemm=Gemm(rows, h, width), module=Module.MLP),
        *([scatter] if tp else []),
    ]


def shared_expert_steps(model: ModelSpec, layout: LayoutSpec, local: int) -> list[Step]:
    """Shared experts on the GPU's own tokens, no dispatch; they run beside the dispatch (overlap_comm)."""
    if not model.shared_ffn_size:
        return []
    h, f = model.hidden_size, model.shared_ffn_size
    return [
        Step("shared_fc13", GEMM, gemm=Gemm(local, model.fc1_widths * f, h), overlap_comm=True, module=SHARED),
        activation_step(
            f"shared_{model.ffn_activation}",
            local * f,
            gated=model.gated_ffn,
            fused=layout.fused_activation,
            probs=False,
            module=SHARED,
            overlap_comm=True,
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
        norm_step("ffn_norm", local * h * BYTES_BF16, sar_recompute=True, module=Module.LAYERNORM, graph=ROUTER),
        # the norm's output feeds the router, the dispatcher (and the shared experts): autograd sums their gradients
        *input_grad_sums("moe_input_grad_sum", local * h * BYTES_BF16, 2 + bool(model.shared_ffn_size), M, ROUTER),
        Step("router", GEMM, gemm=Gemm(local, model.num_experts, h), bf16_only=True, module=M, graph=ROUTER),
        *(random_logits_step(scores) if layout.router_random_logits else []),
        fused_topk_step(scores) if layout.router_fusion else topk,
        *aux_loss_steps(layout, scores),
    ]


def _expert_steps(model: ModelSpec, layout: LayoutSpec, rows: int, groups: int, width: int, h: int) -> list[Step]:
    """The grouped (or per-expert) FFN GEMMs on ``rows`` rows of each of ``groups`` experts, with the
    clamp and FC2 bias kernels of models that have them (workloads/recipes/expert_kernels.py)."""
    sequential = layout.expert_gemm == "sequential"
    # TE's GroupedLinear runs one GEMM per group (its speed: simulator/costs/gemm_efficiency.multi_stream_factor)
    multi_stream = layout.expert_gemm == "multi_stream"
    # The host launches one GEMM per local expert unless one grouped kernel runs them all (layout.expert_gemm).
    launches = 1 if layout.expert_gemm in ("grouped", "cutlass") else groups
    # TE's CUTLASS grouped GEMM needs every group's K equal and a multiple of 128, else it runs the multi-stream
    # cuBLAS path, one GEMM per group (NVIDIA/TransformerEngine v2.8 transformer_engine/common/gemm/
    # cublaslt_gemm.cu nvte_multi_tensor_gemm, all_groups_uniform_k128). GroupedLinear's wgrad (layout "NT",
    # K = each expert's tokens, grouped_linear.py backward) meets that only with equal capacity-padded counts; its
    # per-group launches are the multi-stream path's, priced as such (workloads/graph/op_lists.py).
    wgrad_launches = groups if layout.expert_gemm == "cutlass" and layout.dropless else None
    act = activation_step(
        model.ffn_activation,
        rows * groups * width,
        gated=model.gated_ffn,
        fused=layout.fused_activation,
        probs=True,
        module=ACT,
        launches=groups if sequential else 1,  # SequentialMLP runs each local expert's MLP on its own
    )
    return [
        Step(
            "expert_fc13",
            GEMM,
            gemm=Gemm(rows, model.fc1_widths * width, h, groups, sequential, multi_stream=multi_stream),
            kernels=launches,
            wgrad_kernels=wgrad_launches,
            module=M,
        ),
        *clamp_steps(model, rows * groups, width, ACT),
        act,
        Step(
            "expert_fc2",
            GEMM,
            gemm=Gemm(rows, h, width, groups, sequential, multi_stream=multi_stream),
            kernels=launches,
            wgrad_kernels=wgrad_launches,
            module=M,
        ),
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
    """The MoE FFN with EP (in-node or across nodes), ETP, shared experts and skewed routing: the router, then
    the layout's token dispatcher (workloads/dispatchers) around the experts it dispatches to."""
    n, etp = layout.intra_size, layout.etp
    local = layout.micro_batch * seq_len // n
    plan = layout_ep_plan(model, layout, seq_len, gpus_per_node)
    first, shared = shared_experts_first(layout, shared_expert_steps(model, layout, local))
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
    routed = model.routed_width  # a latent MoE's tokens cross the dispatch and the experts at its latent width
    experts = _expert_steps(
        model, layout, plan.rows_per_expert, plan.experts_local, model.expert_ffn_size // etp, routed
    )
    ctx = MoeContext(
        tokens=local,
        hidden=routed,
        top_k=model.top_k,
        num_experts=model.num_experts,
        experts_local=plan.experts_local,
        degree=plan.degree,
        nodes=plan.nodes,
        tp=n if layout.attention == "tp" else 1,
        nvlink_bytes=plan.nvlink_bytes,
        nic_bytes=plan.nic_bytes,
        all_gather=plan.all_gather,
        fused_permute=layout.fused_permute,
        host_sync=layout.host_sync_per_moe_layer,
        quant_align=quant_alignment(layout),
        shared=bool(shared),
        etp=etp,
        comm_sms=layout.dispatcher_sms,
        router_padded=layout.router_quant_padding,
    )
    parts = ExpertSteps(experts, shared, etp_ag, etp_rs)
    norm, *router = _router_steps(model, layout, local)  # the shared experts take the pre-MLP norm's output
    down, up = latent_steps(model, local)
    return [norm, *first, *router, *down, *DISPATCHERS[layout.token_dispatcher].layer_steps(ctx, parts), *up]


def latent_steps(model: ModelSpec, local: int) -> tuple[list[Step], list[Step]]:
    """A latent MoE's projections on the GPU's own tokens (MoELayer.preprocess fc1_latent_proj before the dispatch,
    postprocess fc2_latent_proj after the combine: TE linears duplicated over TP); none without a latent width."""
    latent, h = model.moe_latent_size, model.hidden_size
    if not latent:
        return [], []
    down = Step("moe_latent_down", GEMM, gemm=Gemm(local, latent, h), module=M, graph=ROUTER)
    return [down], [Step("moe_latent_up", GEMM, gemm=Gemm(local, h, latent), module=M)]


def shared_experts_first(layout: LayoutSpec, shared: list[Step]) -> tuple[list[Step], list[Step]]:
    """(steps before the router, steps beside the dispatch): where a Megatron-Core MoE layer runs its shared experts.

    Without --moe-shared-expert-overlap (layout.inter_op_overlap off) MoELayer.forward calls shared_experts_compute
    before route() and preprocess() (NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_layer.py, custom_forward;
    under EP overlap the same three calls open the layer's pre-dispatch node, models/gpt/fine_grained_callables.py),
    so its kernels are queued before the token-count sync, and a "moe_router" / "moe_preprocess" CUDA graph, which
    returns early after route() / preprocess(), captures them: "A shared expert, if present, is also captured in this
    graph" (NVIDIA, "Scalable Training of Mixture-of-Experts Models with Megatron Core", arXiv 2603.07685v1,
    Sec. 4.3.6, Fig. 24). With the overlap flag the dispatcher runs them beside its all-to-all, eagerly (as before).
    MegaScale-MoE's own dispatcher keeps them beside the dispatch."""
    if not shared or layout.inter_op_overlap or not DISPATCHERS[layout.token_dispatcher].megatron:
        return [], shared
    return [replace(step, overlap_comm=False, graph=ROUTER) for step in shared], []


def quant_alignment(layout: LayoutSpec) -> int:
    """Rows per expert TEGroupedMLP pads to under Transformer Engine's FP8 (layout.fp8_recipe set): 32 for MXFP8,
    16 for the others (Megatron-Core get_fp8_align_size, megatron/core/fp8_utils.py at NVIDIA/Megatron-LM@cf39a4dd);
    0 without TE's FP8 or with capacity-padded (not dropless) expert inputs."""
    if not layout.fp8_recipe or layout.gemm_dtype != "fp8" or not layout.dropless:
        return 0
    return 32 if layout.fp8_recipe == "mxfp8" else 16


def ffn_recipe(model: ModelSpec, layout: LayoutSpec, seq_len: int, gpus_per_node: int, dense: bool) -> list[Step]:
    """The FFN of one layer: dense, or the MoE with EP or TP experts."""
    if dense:
        return dense_ffn_recipe(model, layout, seq_len)
    if layout.ffn == "ep":
        return ep_ffn_recipe(model, layout, seq_len, gpus_per_node)
    return tp_experts_recipe(model, layout, seq_len)
