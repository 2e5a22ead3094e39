"""Every rule between fields: a layout on its own, and a model under a layout on a cluster.

Single-field rules (types, choices, positivity) live with the specs; every rule that relates two fields
or more is here, each a small function that raises a ConfigError naming the field to change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from topologies.errors import ConfigError, check_positive_int
from workloads.schedules.registry import SCHEDULES, block_count
from workloads.specs.hints import batch_hint, ep_hint, gpus_hint, pp_layers_hint
from workloads.specs.limits import check_limit
from workloads.specs.module_precision import parse_rule
from workloads.specs.muon import orthogonalized
from workloads.specs.peft import SPLIT_W_SCHEDULES, frozen_base

if TYPE_CHECKING:  # the specs import this module
    from workloads.specs.layouts import LayoutSpec
    from workloads.specs.models import ModelSpec


def schedule_options(layout: LayoutSpec) -> dict[str, object]:
    """What a schedule takes of the layout beside its stages, micro-batches and chunks (registry.make_schedule)."""
    return {"ep_overlap": layout.ep_overlap, "delay_wgrad": layout.delay_wgrad, "group": layout.microbatch_group}


def check_step(
    model: ModelSpec,
    layout: LayoutSpec,
    num_gpus: int,
    gpus_per_node: int,
    global_batch: int,
    seq_len: int,
) -> None:
    """Raise ConfigError (naming the field) unless the layout can run the model on the cluster."""
    for name, value in (
        ("gpus", num_gpus),
        ("gpus_per_node", gpus_per_node),
        ("global_batch", global_batch),
        ("seq_len", seq_len),
    ):
        check_positive_int(name, value)
    _check_intra_group(model, layout, num_gpus, gpus_per_node, seq_len)
    _check_expert_loads(model, layout)
    _check_expert_groups(model, layout, num_gpus, gpus_per_node)
    _check_pipeline(model, layout, num_gpus, global_batch)
    _check_graphs(model, layout)
    if "mla_up_proj" in layout.recompute_modules and model.attention not in ("mla", "dsv4"):
        raise ConfigError(
            "layout.recompute_modules", "mla_up_proj recomputes MLA's up projections: model.attention mla or dsv4"
        )
    _check_attention_kernels(model, layout)
    if "mhc" in layout.recompute_modules and model.residual_streams <= 1:
        raise ConfigError("layout.recompute_modules", "mhc recomputes mHC's mappings: the model has none (mHC off)")
    if not layout.sequence_parallel and layout.intra_size > 1 and model.moe_layers:
        raise ConfigError(  # megatron/core/transformer/moe/moe_layer.py MoELayer.forward at d98e8a64dd
            "layout.sequence_parallel",
            "MoE with TP needs sequence parallelism: Megatron-Core's MoE layer refuses TP without it in training "
            "(add --sequence-parallel, or set sequence_parallel true)",
        )
    if not layout.sequence_parallel and layout.intra_size > 1 and model.attention == "mla":
        raise ConfigError("layout.sequence_parallel", "MLA under TP without sequence parallelism is not simulated")
    if model.hybrid_pattern:
        _check_hybrid(model, layout)
    if model.moe_latent_size and layout.ffn != "ep":
        raise ConfigError("layout.ffn", "a latent MoE (moe_latent_size) is simulated with expert parallelism (ffn ep)")
    if frozen_base(layout):
        _check_peft(model, layout)
    if orthogonalized(layout.optimizer):
        _check_muon(layout)
    if layout.offload_layers >= model.num_layers:  # megatron/core/transformer/transformer_config.py __post_init__
        raise ConfigError(
            "layout.offload_layers", f"CPU offloading can be done only for layers less than {model.num_layers}"
        )
    for rule in layout.module_precisions:  # --te-precision-config-file's matchers, each "pattern=recipe"
        parse_rule(rule)
    for field in ("bf16_first_layers", "bf16_last_layers"):  # megatron/core/transformer/transformer_config.py
        if not 0 <= getattr(layout, field) <= model.num_layers // layout.pp:
            raise ConfigError(
                f"layout.{field}",
                f"must be between 0 and the layers per pipeline stage ({model.num_layers // layout.pp})",
            )


def _check_peft(model: ModelSpec, layout: LayoutSpec) -> None:
    """What the LoRA simulation covers (workloads/specs/peft.py)."""
    if model.hybrid_pattern or model.attention != "gqa" or model.moe_latent_size:
        raise ConfigError(
            "layout.peft", "LoRA is simulated for GQA transformers, dense or MoE (not Mamba, MLA or latent MoE)"
        )
    if layout.schedule in SPLIT_W_SCHEDULES:
        raise ConfigError(
            "layout.peft", f"LoRA runs no weight gradients to split off: use 1f1b or interleaved, not {layout.schedule}"
        )
    if layout.zero_stage > 1:
        raise ConfigError("layout.peft", "LoRA is simulated with ZeRO 0 or 1 (the distributed optimizer), not FSDP")


def _check_muon(layout: LayoutSpec) -> None:
    """What Megatron-Core's Muon runs with (workloads/specs/muon.py)."""
    if layout.zero_stage > 1:  # megatron/training/arguments.py validate_args at d98e8a64dd
        raise ConfigError(
            "layout.optimizer", "Muon runs with ZeRO 0 or 1 (its layer-wise distributed optimizer), not FSDP"
        )
    if frozen_base(layout):
        raise ConfigError("layout.optimizer", "LoRA is simulated with Adam only")


def _check_attention_kernels(model: ModelSpec, layout: LayoutSpec) -> None:
    """DeepSeek-V4's attention runs on one GPU per sequence (its recipes' TP 1, CP 1); DSA under TP, not Ulysses SP
    (workloads/recipes/dsv4_attention.py, mla.py); unfused attention without CP, GQA / MHA only."""
    if model.attention == "dsv4" and layout.intra_size > 1 and layout.attention in ("tp", "sp"):
        raise ConfigError(
            "layout.intra_size",
            f"DeepSeek-V4's attention is simulated at TP 1 only (its recipes' size), not {layout.attention.upper()} "
            f"{layout.intra_size}: --set intra_size=1 (Megatron: --tensor-model-parallel-size 1)",
        )
    if model.attention == "dsv4" and layout.cp > 1:
        raise ConfigError(
            "layout.cp",
            "DeepSeek-V4's attention is simulated without CP: --set cp=1 (Megatron: --context-parallel-size 1)",
        )
    if layout.attention_backend == "unfused" and (layout.cp > 1 or model.attention != "gqa"):
        raise ConfigError(  # Megatron-Core runs context parallelism in TE's fused / flash attention only
            "layout.attention_backend",
            "unfused attention is simulated for GQA / MHA layers without CP: --set cp=1 (Megatron: "
            "--context-parallel-size 1), or a fused backend (--transformer-impl transformer_engine)",
        )
    if model.dsa and layout.attention == "sp" and layout.intra_size > 1:
        raise ConfigError(
            "layout.attention", "DSA's sparse attention is simulated under TP, not Ulysses SP: --set attention=tp"
        )


def _check_hybrid(model: ModelSpec, layout: LayoutSpec) -> None:
    """A hybrid model's Mamba layers run as Megatron-Core's MambaMixer under tensor parallelism (workloads/recipes/
    mamba.py): its heads and groups split over TP; context parallelism (its own exchange of the conv and scan states,
    megatron/core/ssm/mamba_context_parallel.py) and Ulysses attention are not simulated."""
    n = layout.intra_size
    if layout.cp > 1:
        raise ConfigError("layout.cp", "a hybrid model runs without context parallelism in moesim: --set cp=1")
    if n > 1 and layout.attention != "tp":
        raise ConfigError(
            "layout.attention",
            "a hybrid model's layers are simulated under Megatron's TP: give the job as Megatron-LM flags "
            "(--megatron-args), or --set attention=tp",
        )
    if "M" in model.hybrid_pattern and (model.mamba_heads % n or model.mamba_groups % n):
        raise ConfigError(
            "layout.intra_size",
            f"TP {n} must divide the Mamba heads ({model.mamba_heads}) and groups ({model.mamba_groups})",
        )
    if "G" in model.hybrid_pattern and (model.gdn_key_heads % n or model.gdn_value_heads % n):
        raise ConfigError(
            "layout.intra_size",
            f"TP {n} must divide the Gated DeltaNet key heads ({model.gdn_key_heads}) and value heads "
            f"({model.gdn_value_heads})",
        )


def _check_graphs(model: ModelSpec, layout: LayoutSpec) -> None:
    """The full-iteration CUDA graph holds no host sync: torch refuses a device-to-host wait while a stream is
    captured, so Megatron's FullCudaGraphWrapper (megatron/core/full_cuda_graph.py at d98e8a64dd) fails to capture
    a step whose MoE layers copy their token counts to the host (dropless routing; token_dispatcher.py
    _maybe_dtoh_and_synchronize, and HybridEP "sizes buffers dynamically (CPU sync in dispatch)" without
    moe_expert_rank_capacity_factor). Static shapes remove the sync: padding to capacity, or a static per-rank
    budget (--moe-expert-rank-capacity-factor, the flex dispatcher's hybridep / ncclep backends)."""
    if "iteration" in layout.cuda_graph_scope and model.moe_layers and layout.host_sync_per_moe_layer:
        raise ConfigError(
            "layout.host_sync_per_moe_layer",
            "the full-iteration CUDA graph cannot hold the MoE layers' device-to-host token-count sync (dropless "
            "routing): give them static shapes (--moe-expert-capacity-factor with --moe-pad-expert-input-to-"
            "capacity under --moe-token-dispatcher-type alltoall, or --moe-expert-rank-capacity-factor with "
            "--moe-flex-dispatcher-backend hybridep), or use --cuda-graph-impl transformer_engine",
        )


def data_parallel(layout: LayoutSpec, num_gpus: int) -> int:
    """Data-parallel replicas: GPUs / (intra_size x cp x pp)."""
    return num_gpus // (layout.intra_size * layout.cp * layout.pp)


def _check_intra_group(model: ModelSpec, layout: LayoutSpec, num_gpus: int, gpus_per_node: int, seq_len: int) -> None:
    """The TP/SP/EP group of intra_size GPUs and the CP group around it fit the nodes and the shapes."""
    n, cp = layout.intra_size, layout.cp
    if n > gpus_per_node or gpus_per_node % n:
        raise ConfigError(
            "layout.intra_size", f"TP/SP/EP degree {n} must divide the scale-up domain of {gpus_per_node} GPUs"
        )
    if cp > 1 and ((n * cp) % gpus_per_node if n * cp > gpus_per_node else gpus_per_node % (n * cp)):
        raise ConfigError("layout.cp", f"intra_size x cp = {n * cp} must divide or fill whole nodes of {gpus_per_node}")
    if cp > 1 and (seq_len % (2 * cp) or (layout.micro_batch * seq_len // cp) % n):
        raise ConfigError(
            "seq_len", f"must split into 2 x cp = {2 * cp} chunks of micro_batch x tokens divisible by {n}"
        )
    if num_gpus % (n * cp * layout.pp):
        label = "intra_size x pp" if cp == 1 else "intra_size x cp x pp"
        raise ConfigError(
            "gpus",
            f"{num_gpus} is not a multiple of {label} = {n * cp * layout.pp}{gpus_hint(model, layout, num_gpus)}",
        )
    if model.num_heads % n:
        raise ConfigError("model.num_heads", f"{model.num_heads} heads not divisible by TP/SP degree {n}")
    if layout.ffn == "ep" and model.num_experts % n:
        raise ConfigError("model.num_experts", f"{model.num_experts} experts not divisible by EP degree {n}")
    if layout.ffn == "tp" and model.expert_ffn_size % n:
        raise ConfigError("model.expert_ffn_size", f"not divisible by TP degree {n}")
    if (layout.micro_batch * seq_len) % n:
        raise ConfigError("seq_len", f"micro_batch x seq_len must be divisible by {n}")


def _check_expert_loads(model: ModelSpec, layout: LayoutSpec) -> None:
    loads = layout.expert_loads
    if loads and (len(loads) != model.num_experts or min(loads) < 0 or sum(loads) <= 0):
        raise ConfigError("layout.expert_loads", f"must be {model.num_experts} non-negative loads, not all 0")


def _expert_group_rule(ep: int, etp: int, n: int, pp: int, num_gpus: int) -> str:
    """What an EP x ETP group of ``ep`` breaks among the stage's GPUs ('' if nothing)."""
    group, stage_gpus = ep * etp, num_gpus // pp
    if group % n:
        # NOTE: moesim's own rule: Megatron-Core's MoE parallel folding would let the group cut across TP groups
        return (
            f"EP {ep} x ETP {etp} = {group} is not a multiple of intra_size {n}: moesim lays each expert group "
            "over whole TP/SP groups"
        )
    if stage_gpus % group:
        return (
            f"EP {ep} x ETP {etp} = {group} does not divide the {stage_gpus:,} GPUs of a stage ({num_gpus:,} / pp {pp})"
        )
    return ""


def _node_rule(ep: int, per_node: int) -> str:
    """What an EP degree breaks of the node's ``per_node`` EP ranks: whole nodes across them, a divisor inside ('' if
    nothing)."""
    if ep > per_node and ep % per_node:
        return f"cross-node EP {ep} must be a multiple of {per_node} EP ranks per node"
    if ep < per_node and per_node % ep:
        return f"in-node EP {ep} must divide the {per_node} EP ranks of a node"
    return ""


def _check_expert_groups(model: ModelSpec, layout: LayoutSpec, num_gpus: int, gpus_per_node: int) -> None:
    """EP x ETP groups: ETP inside the node, EP in or across whole nodes, top-k reachable under node limits."""
    ep, n, etp = layout.ep_degree, layout.intra_size, layout.etp
    if etp > 1 and (gpus_per_node % etp or model.expert_ffn_size % etp):
        raise ConfigError("layout.etp", f"ETP {etp} must divide the {gpus_per_node} GPUs of a node and expert_ffn_size")
    if (ep == n and etp == 1) or layout.ffn != "ep":
        return
    per_node = gpus_per_node // etp  # EP ranks per node: ETP groups sit inside the node (Megatron's order)
    broken = _expert_group_rule(ep, etp, n, layout.pp, num_gpus)
    if broken:
        fits = [  # NOTE: the experts' divisors, not every degree up to the GPU count (a million GPUs)
            other
            for other in range(1, model.num_experts + 1)
            if model.num_experts % other == 0
            and not _expert_group_rule(other, etp, n, layout.pp, num_gpus)
            and not _node_rule(other, per_node)
        ]
        raise ConfigError("layout.ep", broken + ep_hint(model, layout, num_gpus, fits))
    if model.num_experts % ep:
        raise ConfigError("model.num_experts", f"{model.num_experts} experts not divisible by EP degree {ep}")
    node = _node_rule(ep, per_node)
    if node:
        raise ConfigError("layout.ep", node)
    nodes = max(ep // per_node, 1)
    reachable = model.num_experts // nodes * (min(layout.ep_max_nodes, nodes) if layout.ep_max_nodes else nodes)
    if model.top_k > reachable:
        raise ConfigError(
            "layout.ep_max_nodes", f"top_k {model.top_k} exceeds the {reachable} experts a token may reach"
        )


def _check_pipeline(model: ModelSpec, layout: LayoutSpec, num_gpus: int, global_batch: int) -> None:
    """The layers over the pipeline's blocks; the batch over DP replicas and micro-batches; the schedule."""
    blocks, counts = block_count(layout.schedule, layout.pp, layout.virtual_stages), layout.block_layers
    if counts and (len(counts) != blocks or sum(counts) != model.num_layers):
        # NOTE: a --set of pp or virtual_stages over a job whose layers were split (--megatron-args splits uneven
        # layers itself) lands here with the old split: say where to change the blocks
        moved = (
            f", a split into {len(counts)} blocks: change pp or virtual stages where the layers were split "
            "(--megatron-args or the layout), not with --set"
            if len(counts) != blocks and sum(counts) == model.num_layers
            else ""
        )
        raise ConfigError(
            "layout.block_layers",
            f"must give the layers of each of the {blocks} pipeline blocks, {model.num_layers} in all; got {counts}"
            + moved,
        )
    if not counts and not (layout.uneven_pp or layout.balance_blocks) and model.num_layers % blocks:
        raise ConfigError(
            "layout.pp",
            f"{model.num_layers} layers not divisible by the {blocks} pipeline blocks of {layout.schedule} at pp "
            f"{layout.pp}" + pp_layers_hint(model, layout, num_gpus),
        )
    dp = data_parallel(layout, num_gpus)
    if global_batch % (dp * layout.micro_batch):
        raise ConfigError(
            "global_batch",
            f"{global_batch} not divisible by dp x micro_batch = {dp * layout.micro_batch}"
            + batch_hint(global_batch, dp * layout.micro_batch),
        )
    micro_batches = global_batch // (dp * layout.micro_batch)
    check_limit(
        "global_batch",
        "micro_batches",
        micro_batches,
        f"micro-batches per pipeline (global_batch {global_batch} / (dp x micro_batch))",
    )
    SCHEDULES[layout.schedule](layout.pp, micro_batches, layout.virtual_stages, **schedule_options(layout)).check()
