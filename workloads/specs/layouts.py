"""Parallel layouts: how one training step is split over GPUs, and which system techniques are on.

One dataclass describes every layout; the presets (Megatron-LM, MegaScale-MoE and the Table 5 ablation
steps) are variations of it, not copies.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from topologies.errors import ConfigError, lookup_preset
from workloads.dispatchers.registry import DISPATCHERS
from workloads.ops import Module
from workloads.schedules.registry import SCHEDULES
from workloads.specs import hybrid_dp, memory_options
from workloads.specs.cuda_graphs import GRAPH_SCOPES, ITERATION
from workloads.specs.fieldtypes import check_types, field_names
from workloads.specs.limits import check_limit
from workloads.specs.muon import MUON_NS_STEPS, MUON_TP_MODES, OPTIMIZERS
from workloads.specs.peft import LORA_MODULES, LORA_RANK, PEFT_MODES
from workloads.specs.precision import FP8_RECIPES, MAIN_GRADS_DTYPES, MAIN_PARAMS_DTYPES, MOMENT_DTYPES
from workloads.specs.routing import ROUTINGS

# --- rules between the fields of one layout, checked when it is built (model-under-layout rules:
# workloads/specs/validation.py)
GEMM_DTYPES = ("bf16", "fp8")


def check_layout(layout: LayoutSpec) -> None:
    """Rules between the fields of one layout, checked when it is built."""
    if not SCHEDULES[layout.schedule].virtual_stages and layout.virtual_stages != 1:
        raise ConfigError("layout.virtual_stages", f"must be 1 for the {layout.schedule} schedule")
    if layout.intra_op_overlap and not layout.inter_op_overlap:
        raise ConfigError("layout.intra_op_overlap", "needs inter_op_overlap")
    if layout.routing not in ROUTINGS:
        raise ConfigError("layout.routing", f"must be one of {', '.join(ROUTINGS)}")
    if layout.gemm_dtype not in GEMM_DTYPES:
        raise ConfigError("layout.gemm_dtype", f"must be one of {', '.join(GEMM_DTYPES)}")
    for field in (
        "ep",
        "ep_max_nodes",
        "zipf_exponent",
        "seed",
        "recompute_kept_layers",
        "dispatcher_sms",
        "microbatch_group",
    ):
        if getattr(layout, field) < 0:
            raise ConfigError(f"layout.{field}", f"must be >= 0, got {getattr(layout, field)}")
    if any(count < 0 for count in layout.block_layers):
        raise ConfigError("layout.block_layers", f"layer counts must be >= 0, got {layout.block_layers}")
    if layout.ffn != "ep":
        if layout.routing != "uniform" or layout.dropless or layout.expert_loads or layout.ep:
            raise ConfigError("layout.ffn", "zipf or consecutive routing, dropless, expert_loads and ep need ffn: ep")
        if layout.etp > 1:
            raise ConfigError(
                "layout.etp", 'expert-tensor parallelism needs ffn "ep" (ffn "tp" already splits experts)'
            )
        if layout.ep_overlap:  # Megatron-LM arguments.py asserts EP > 1 for --overlap-moe-expert-parallel-comm
            raise ConfigError("layout.ep_overlap", 'overlaps the EP all-to-alls: needs ffn "ep"')
    if ITERATION in layout.cuda_graph_scope and len(layout.cuda_graph_scope) > 1:
        # megatron/training/arguments.py validate_args at d98e8a64dd
        raise ConfigError(
            "layout.cuda_graph_scope",
            f'"{ITERATION}" (--cuda-graph-impl full_iteration) stands alone: --cuda-graph-modules must be empty '
            "when --cuda-graph-impl=full_iteration (Megatron-LM)",
        )
    if layout.router_quant_padding and not (layout.fp8_recipe and layout.gemm_dtype == "fp8"):
        # transformer_config.py __post_init__ at NVIDIA/Megatron-LM@d98e8a64dd
        raise ConfigError("layout.router_quant_padding", "fp8/fp4 must be specified (an FP8 or FP4 recipe)")
    if layout.router_quant_padding and layout.token_dispatcher in ("allgather", "megascale"):
        raise ConfigError("layout.router_quant_padding", "needs Megatron-Core's alltoall or flex token dispatcher")
    _check_sequence_parallel(layout)
    memory_options.check_layout(layout)
    hybrid_dp.check_layout(layout)


def _check_sequence_parallel(layout: LayoutSpec) -> None:
    """TP without sequence parallelism: TP attention only, and nothing that needs the sequence sharded."""
    if layout.sequence_parallel:
        return
    if layout.attention != "tp":
        raise ConfigError("layout.sequence_parallel", 'false applies to TP attention (attention "tp") only')
    if layout.tp_comm_overlap:  # Megatron-LM arguments.py asserts sequence parallelism for --tp-comm-overlap
        raise ConfigError("layout.tp_comm_overlap", "needs sequence_parallel (Megatron-LM)")
    if layout.cp > 1:
        raise ConfigError("layout.cp", "CP with TP but without sequence parallelism is not simulated")
    if layout.recompute == "sar":  # SAR and its memory formula (MegaScale-MoE Sec. 4.1) shard the sequence
        raise ConfigError(
            "layout.recompute", "MegaScale-MoE's \"sar\" needs sequence_parallel (Megatron-Core's modes do not)"
        )


ATTENTION_MODES = ("tp", "sp")  # tensor parallel (Megatron-style with sequence parallel) or Ulysses SP
FFN_MODES = ("tp", "ep")  # tensor-parallel experts or expert parallel
RECOMPUTE = ("none", "sar", "full", "selective")  # selective: the Megatron-Core modules in recompute_modules
RECOMPUTE_MODULES = tuple(module.value for module in Module if module != Module.NONE)
EXPERT_GEMMS = ("grouped", "sequential", "multi_stream", "cutlass")
GRAD_SYNC = ("bf16-a2a", "fp32-rs")
COMM_DTYPES = ("bf16", "fp8")
TOKEN_DISPATCHERS = tuple(DISPATCHERS)  # workloads/dispatchers/registry.py
CROSS_ENTROPY_IMPLS = ("", "te")
# "" = the calibration's family; "cudnn-fp8": cuDNN's FP8 attention (TE fp8_dpa, Megatron-Core's
# fp8_dot_product_attention, which has no Megatron-LM flag), published on Blackwell only (simulator/costs/blackwell_tables.py);
# "unfused": the s x s scores materialized (simulator/costs/kernels.py unfused_attention_time_s)
ATTENTION_BACKENDS = ("", "fa3", "fa2", "cudnn", "cudnn-fp8", "unfused")


@dataclass(frozen=True)
class LayoutSpec:
    """Parallel degrees and the system techniques of one training configuration."""

    name: str
    attention: str = "sp"
    ffn: str = "ep"
    intra_size: int = 8  # n: GPUs that share one layer inside the node (TP, SP or EP degree)
    pp: int = 15
    micro_batch: int = 1
    schedule: str = "1f1b"
    virtual_stages: int = 1
    # the interleaved schedule's micro-batches per group (--microbatch-group-size-per-virtual-pipeline-stage); 0: pp
    microbatch_group: int = 0
    inter_op_overlap: bool = True  # communication on its own stream beside independent compute
    intra_op_overlap: bool = True  # collectives fused into their GEMMs, tile by tile (Sec. 4.2)
    # Expert GEMMs: "grouped" one grouped kernel per GEMM (MegaScale-MoE); "sequential" one GEMM after another
    # per local expert (Megatron SequentialMLP); "multi_stream" Transformer Engine's GroupedLinear (Megatron-Core
    # TEGroupedMLP under --moe-grouped-gemm): one cuBLAS GEMM per local expert, spread round-robin over TE's
    # compute streams so they run side by side like one grouped GEMM, but the host launches each
    # (TransformerEngine transformer_engine/common/gemm/cublaslt_gemm.cu multi_stream_cublas_gemm, commit
    # 5c62f72; its CUTLASS grouped kernel is BF16-only and opt-in, NVTE_USE_CUTLASS_GROUPED_GEMM). "cutlass": that
    # opt-in, which TE takes only for uniform K, a multiple of 128 (v2.8 cublaslt_gemm.cu nvte_multi_tensor_gemm), so
    # a dropless wgrad (K = each expert's tokens) falls back to the multi-stream cuBLAS launches.
    expert_gemm: str = "grouped"
    host_sync_per_moe_layer: bool = False  # token counts copied to the host before the expert GEMMs
    fused_permute: bool = True  # permutation and router fused into few kernels
    # the SwiGLU as one kernel (Megatron's --bias-swiglu-fusion, its command line's default) or as
    # Megatron-Core's eager ops (--no-bias-swiglu-fusion; workloads/recipes/activation.py); a plain MLP's experts
    # with the router's probs applied inside their activation kernel or by an eager product after it
    fused_activation: bool = True
    # mHC's kernels (model.residual_streams > 1; workloads/recipes/residual.py): Megatron-Core's own at d98e8a64 (an
    # eager Sinkhorn-Knopp, 6 kernels an iteration) or one fused kernel per mapping (Megatron-Bridge's DeepSeek-V4
    # recipes set use_fused_mhc: a cuTile kernel on Blackwell, examples/models/deepseek_v4/README.md at 067f987d)
    fused_mhc: bool = False
    # Megatron-Core's TopKRouter kernels after the gating GEMM (workloads/recipes/router.py): TE's fused router
    # (--moe-router-fusion), the load-balancing loss (--moe-router-load-balancing-type aux_loss with
    # --moe-aux-loss-coeff > 0; fused only) and the random logits of --moe-router-force-load-balancing.
    router_fusion: bool = False
    router_aux_loss: bool = False
    router_random_logits: bool = False
    # The loss after the LM head (workloads/recipes/cross_entropy.py): "te" TE's Triton kernels (Megatron
    # --cross-entropy-loss-fusion --cross-entropy-fusion-impl te); "" three FP32 passes over the logits (assumed).
    cross_entropy: str = ""
    # The attention kernel family (simulator/costs/attention_cost.py): "" the calibration's (Calibration.attention_kernel,
    # FlashAttention-3); "cudnn" cuDNN's fused attention, which Transformer Engine runs on Hopper+ whenever it is
    # available (Megatron --transformer-impl transformer_engine, --attention-backend auto or fused); "cudnn-fp8" its FP8
    # attention (TE fp8_dpa), timed on Blackwell only; "unfused" the score matrices materialized, as Megatron-Core's local
    # DotProductAttention, TE's UnfusedDotProductAttention and Megatron-LM before FlashAttention run it.
    attention_backend: str = ""
    # "sar": MegaScale-MoE's selective activation rematerialization (Sec. 4.1): norms, TP all-gathers, the
    # permutation and the dispatch re-run in backward, so the dispatch is communicated again (its 2k
    # routed-copy terms are what SAR frees); keep_dispatch keeps the received tokens instead.
    recompute: str = "sar"
    grad_sync: str = "bf16-a2a"  # Sec. 5: BF16 all-to-all + FP32 local sum, or FP32 reduce-scatter
    zero_stage: int = 1
    # DP instances (Megatron --num-distributed-optimizer-instances; workloads/specs/hybrid_dp.py): ZeRO shards and FSDP
    # units over DP / dp_instances GPUs, gradients reduced across them once a step; HSDP "no_shard" or Hybrid-FSDP "optim"
    dp_instances: int = 1
    outer_dp_sharding: str = "no_shard"
    capacity_factor: float = 1.25  # expert GEMMs run on capacity-padded buffers
    dp_overlap: bool = True  # MegaScale (NSDI'24): DP sync overlapped with the first/last micro-batches
    # true: every stage starts gathering its weights as the step starts (Megatron's --align-param-gather, its default
    # under the interleaved schedule; the paper's stack does not say); false: each stage as its first forward starts.
    # Either way a layer's forward waits for its bucket (simulator/engine/grad_sync.py ParamGather).
    align_param_gather: bool = True
    a2a_topk_threshold: int = 6  # MegaScale-MoE's dispatch switches from all-to-all to AG/RS above this top-k
    # Beyond the paper (validated in workloads.specs.validation; defaults = the paper's layouts).
    ep: int = 0  # EP degree; 0 = intra_size (in-node EP); > GPUs per node spans nodes (DeepEP style)
    ep_max_nodes: int = 0  # node-limited routing M: a token reaches at most M nodes; 0 = unlimited
    routing: str = "uniform"  # expert routing: "uniform" | "zipf" | "consecutive" (workloads.specs.routing)
    zipf_exponent: float = 1.0
    seed: int = 0  # seeds the numpy Generator of skewed routing
    dropless: bool = False  # expert GEMMs run on the tokens received, no capacity padding or dropping
    expert_loads: tuple[float, ...] = ()  # explicit per-expert load (overrides routing), normalised
    gemm_dtype: str = "bf16"  # "fp8": linear-layer GEMMs at the FP8 peak (DeepSeek-V3 Sec. 3.3)
    # Context parallelism (ring attention, Megatron-Core CP): cp GPUs split each sequence (workloads/recipes/cp.py).
    cp: int = 1
    # Expert-tensor parallelism: each expert's FFN width split over etp GPUs (AG/RS of its tokens).
    etp: int = 1
    # "fp8": dispatch and TP all-gathers into linear layers move FP8 + per-128 scales; combine stays BF16.
    comm_dtype: str = "bf16"
    uneven_pp: bool = False  # allow layers not divisible by pp: last, then first stages take fewer
    block_layers: tuple[int, ...] = ()  # explicit layers of each pipeline block (pp x virtual stages), in order
    # Split the layers over the blocks by cost, the busiest block's then the busiest stage's work least
    # (simulator/report/balance.py: each layer kind, the embedding and the head timed alone), within HBM,
    # starting from block_layers if given.
    balance_blocks: bool = False
    # Full recomputation of only some layers (Megatron-LM's --recompute-method block): the last
    # recompute_kept_layers layers of each chunk keep their activations. With recompute_to_fit, simulate()
    # keeps as many as fit in HBM, as one tunes --recompute-num-layers. Both apply to recompute "full" only.
    recompute_kept_layers: int = 0
    recompute_to_fit: bool = False
    # Selective recomputation (recompute "selective", Megatron-Core's --recompute-modules): the modules
    # (workloads.ops.Module values) whose forward steps re-run in backward and whose activations are freed.
    recompute_modules: tuple[str, ...] = ()
    # Under SAR, keep the routed token copies the dispatch delivered (the expert GEMMs' input) for backward
    # instead of permuting and sending them again: no dispatch in backward, k more units of bsh/n per layer
    # (simulator.memory.per_gpu). Megatron-Core's choice is by module: "moe" checkpoints the whole MoE layer and
    # re-sends dispatch and combine, "moe_act" recomputes only the activation and sends nothing
    # (TransformerConfig.recompute_modules, megatron/core/transformer/transformer_config.py;
    # MoELayer.forward's checkpoint of custom_forward, megatron/core/transformer/moe/moe_layer.py).
    keep_dispatch: bool = False
    # DeepSeek-V3's low-precision activation storage (arXiv 2412.19437 Sec. 3.3.3, "Low-Precision Activation"):
    # the input of the linear layer after attention, which attention's backward also reads, kept once in the
    # 12-bit E5M6 format; the input of the routed experts' SwiGLU kept in FP8, its output recomputed in backward
    # (recompute_modules moe_act). Counted tensor by tensor (simulator.memory.activations); the E5M6 and FP8
    # conversion kernels are not timed.
    fp8_activation_cache: bool = False
    # Activations offloaded to host memory (workloads/specs/memory_options.py): the first offload_layers layers' whole
    # (--cpu-offloading-num-layers), or the inputs of offload_modules of at least offload_min_elements elements
    # (--fine-grained-activation-offloading --offload-modules --min-offloaded-tensor-size); memory only (not timed).
    offload_layers: int = 0
    offload_modules: tuple[str, ...] = ()
    offload_min_elements: int = 1_048_576
    # The flex dispatcher's static per-rank budget (Megatron --moe-expert-rank-capacity-factor, TransformerConfig
    # moe_expert_rank_capacity_factor): receive buffers, and the routed activations the experts keep, sized for
    # local tokens x top-k x this factor (0: sized by the tokens received); under the paged stash
    # (--moe-paged-stash) the kept activations go to pages sized for the average token count x paged_stash_factor
    # (moe_paged_stash_buffer_size_factor_cuda, default 1.10). Memory only: the stash copies are not timed.
    expert_rank_capacity: float = 0.0
    paged_stash_factor: float = 0.0
    # Optimizer and gradient storage (Megatron-Core distributed optimizer; simulator.memory.per_gpu): dtypes of the
    # main gradients, FP32 master weights and Adam moments; param_remainders keeps only the 16 low bits of
    # each FP32 master weight beside its BF16 copy (TE FusedAdam store_param_remainders).
    main_grads_dtype: str = "fp32"
    # The wgrad GEMM adds into the main gradient in its epilogue (Megatron's default), else a kernel per weight adds its
    # written-out product (--no-gradient-accumulation-fusion; workloads/graph/main_grad.py)
    grad_accumulation_fusion: bool = True
    main_params_dtype: str = "fp32"
    exp_avg_dtype: str = "fp32"
    exp_avg_sq_dtype: str = "fp32"
    param_remainders: bool = False
    fp8_param_gather: bool = False  # linear-layer weights stored in FP8 (1 byte); needs gemm_dtype "fp8"
    # TE scaling recipe of FP8 training, a workloads.specs.precision.Fp8Recipe value (a plain string here, as YAML
    # writes it; the op builder types it): the GEMM kernel (workloads.specs.precision.FP8_RECIPE_PRECISION) and the
    # quantization kernels around every FP8 GEMM (workloads/recipes/fp8_quant.py); "" runs none.
    fp8_recipe: str = ""
    # Megatron-Core's combined 1F1B (workloads/schedules/base.py pair_steady): EP all-to-all overlapped with another
    # micro-batch's compute (--overlap-moe-expert-parallel-comm), each layer's weight gradients where Megatron-Core
    # issues them under --delay-wgrad-compute (workloads/graph/combined_1f1b.py).
    ep_overlap: bool = False
    delay_wgrad: bool = False
    # Transformer Engine's userbuffers (Megatron --tp-comm-overlap; workloads/graph/op_lists.py): the TP all-gathers and
    # reduce-scatters of attention and dense MLPs overlapped with their linear layers' GEMMs.
    tp_comm_overlap: bool = False
    # Megatron-Core's TP linear layers without userbuffers: a column-parallel layer's backward re-gathers its saved
    # input shard beside the dgrad GEMM and reduce-scatters the dgrad beside the wgrad GEMM, both NCCL calls with
    # async_op=True (megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication at
    # f1f03922; Transformer Engine v1.12 layernorm_linear.py backward, "Overlap input AG with dgrad", "Overlap
    # dgrad-RS/AR with wgrad"): tp_comm_overlap's bulk overlaps, over NCCL. MegaScale-MoE's own TP (the Table 5
    # baseline, "no overlap") does not.
    tp_async_backward: bool = False
    # Megatron's --sequence-parallel under TP attention (attention "tp"): the norms, residuals and the tensors
    # between the TP blocks are split over the t GPUs, the blocks entered by an all-gather and left by a
    # reduce-scatter. False: every TP rank keeps the whole sequence, each block ends in an all-reduce and the
    # gradient of its input is all-reduced in backward (megatron/core/tensor_parallel/mappings.py
    # reduce_from_ / copy_to_tensor_model_parallel_region). Dense models only: Megatron-Core's MoE layer
    # refuses TP without sequence parallelism in training (megatron/core/transformer/moe/moe_layer.py at
    # d98e8a64dd). Ulysses SP (attention "sp") shards the sequence either way.
    sequence_parallel: bool = True
    # Megatron-LM 2021-22 and DeepSpeed's pipeline split each PP send of a TP layer without sequence parallelism over
    # the TP ranks, which send 1/n each and all-gather it on the receiving node's NVLink (SC21 Sec. 4.1,
    # megatron/p2p_communication.py scatter_gather_tensors_in_pipeline; DeepSpeed PipelineEngine pipe_partitioned)
    pp_scatter_gather: bool = False
    # The MoE layer's token dispatcher (workloads/dispatchers/registry.py): "megascale" MegaScale-MoE's own
    # (in-node all-to-all or AG/RS above a2a_topk_threshold, DeepEP-style across nodes), or Megatron-Core's
    # --moe-token-dispatcher-type: "alltoall", "allgather", "flex-deepep", "flex-hybridep". Each issues its own
    # kernels, collectives and host syncs, and sends its own copies (one per routed expert, or per rank / node).
    token_dispatcher: str = "megascale"
    # SMs each DeepEP-class dispatch / combine kernel runs on, taken from the compute beside it
    # (simulator/streams/sm_share.py): Megatron --moe-flex-dispatcher-num-sms (or the deprecated --moe-deepep-num-sms
    # / --moe-hybridep-num-sms, TransformerConfig.__post_init__). 0: the backend's own default
    # (simulator/costs/calibration.py: DeepEP's 20, HybridEP's 24 in one NVLink domain, 8 across).
    dispatcher_sms: int = 0
    # --moe-router-padding-for-quantization: the router pads each expert's tokens to the FP8 / FP4 alignment, so the
    # experts skip TEGroupedMLP's padding and the alltoall dispatcher's output size is dynamic (its host waits earlier)
    router_quant_padding: bool = False
    # CUDA graphs (Megatron-Core --cuda-graph-impl with --cuda-graph-modules; workloads/specs/cuda_graphs.py): the
    # scopes captured, "layer" for a whole layer, "iteration" for the whole step (full_iteration); () is eager.
    cuda_graph_scope: tuple[str, ...] = ()
    # Parameter-efficient fine-tuning (Megatron-Bridge's peft; Megatron-LM has no flag): "lora" freezes the base weights
    # and trains rank-``lora_rank`` adapters beside the attention and MLP linears (workloads/specs/peft.py).
    peft: str = "none"
    lora_rank: int = LORA_RANK
    lora_modules: tuple[str, ...] = LORA_MODULES
    # Megatron --optimizer (workloads/specs/muon.py; --muon-num-ns-steps, --muon-tp-mode), "adam" or "muon"
    optimizer: str = "adam"
    muon_ns_steps: int = MUON_NS_STEPS
    muon_tp_mode: str = "duplicated"
    # Megatron's --first-last-layers-bf16: the first / last layers (global indices) run BF16 GEMMs in an FP8 / FP4 run;
    # --te-precision-config-file's matchers, "pattern=recipe" in order (workloads/specs/module_precision.py)
    bf16_first_layers: int = 0
    bf16_last_layers: int = 0
    module_precisions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Check types and the rules between fields; raise ConfigError naming the field."""
        for name in field_names(type(self)):  # YAML gives lists (the tuple fields); keep the spec hashable
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        check_types("layout", self)
        choices = {
            "attention": ATTENTION_MODES,
            "ffn": FFN_MODES,
            "schedule": tuple(SCHEDULES),
            "recompute": RECOMPUTE,
            "expert_gemm": EXPERT_GEMMS,
            "grad_sync": GRAD_SYNC,
            "comm_dtype": COMM_DTYPES,
            "main_grads_dtype": MAIN_GRADS_DTYPES,
            "main_params_dtype": MAIN_PARAMS_DTYPES,
            "exp_avg_dtype": MOMENT_DTYPES,
            "exp_avg_sq_dtype": MOMENT_DTYPES,
            "fp8_recipe": FP8_RECIPES,
            "token_dispatcher": TOKEN_DISPATCHERS,
            "cross_entropy": CROSS_ENTROPY_IMPLS,
            "attention_backend": ATTENTION_BACKENDS,
            "peft": PEFT_MODES,
            "optimizer": OPTIMIZERS,
            "muon_tp_mode": MUON_TP_MODES,
        }
        if not self.lora_modules or any(module not in LORA_MODULES for module in self.lora_modules):
            raise ConfigError("layout.lora_modules", f"must be among {', '.join(LORA_MODULES)}")
        for scope in self.cuda_graph_scope:
            if scope not in GRAPH_SCOPES:
                raise ConfigError("layout.cuda_graph_scope", f"must be among {', '.join(GRAPH_SCOPES)}")
        for field, allowed in choices.items():
            if getattr(self, field) not in allowed:
                raise ConfigError(f"layout.{field}", f"must be one of {', '.join(allowed)}")
        positive = ("intra_size", "pp", "micro_batch", "virtual_stages", "cp", "etp", "lora_rank", "muon_ns_steps")
        for field in (*positive, "dp_instances"):
            if getattr(self, field) < 1:
                raise ConfigError(f"layout.{field}", "must be a positive integer")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ConfigError("layout.zero_stage", "must be 0, 1, 2 or 3")
        if self.capacity_factor < 1.0:
            raise ConfigError("layout.capacity_factor", "must be >= 1.0")
        check_limit("layout.capacity_factor", "capacity_factor", self.capacity_factor, "capacity factor")
        for module in self.recompute_modules:
            if module not in RECOMPUTE_MODULES:
                raise ConfigError(
                    "layout.recompute_modules", f"{module!r} is not one of {', '.join(RECOMPUTE_MODULES)}"
                )
        check_layout(self)

    @property
    def ep_degree(self) -> int:
        """The EP degree: ``ep``, or intra_size when unset (in-node EP, the paper's)."""
        return self.ep or self.intra_size

    @property
    def sequence_shards(self) -> int:
        """GPUs a micro-batch's sequence is split over outside core attention and the TP blocks (before CP): the
        SP or TP group, or 1 under TP without sequence parallelism (every TP rank keeps the whole sequence)."""
        return self.intra_size if self.sequence_parallel or self.attention == "sp" else 1

    def with_(self, **changes: object) -> LayoutSpec:
        return replace(self, **changes)


# MegaScale-MoE (Sec. 3-5): SP attention, EP experts, both overlaps, SAR, BF16 gradient all-to-all.
MEGASCALE_MOE = LayoutSpec("megascale-moe")

# Megatron-LM (commit f1f03922, paper Sec. 6): TP=8 with sequence parallelism for attention and
# experts; the MoE layer of Megatron-Core at that time: all-gather token dispatcher whose token counts
# go to the host (a device->host sync per MoE layer), SequentialMLP (one GEMM per local expert; grouped
# GEMM was opt-in), unfused permutation (each expert's SwiGLU fused: --bias-swiglu-fusion is Megatron-LM's
# default, megatron/core/transformer/mlp.py bias_swiglu_impl at f1f03922); collectives on the compute stream,
# but for the backward re-gather and reduce-scatter of the column-parallel QKV beside its dgrad and wgrad
# (tp_async_backward); FP32 gradient reduce-scatter (distributed optimizer). Full recomputation of every layer (Megatron's
# --recompute-granularity full --recompute-method uniform --recompute-num-layers 1): without it the
# all-gather dispatcher's activations (all b s k token copies per GPU plus the int64 index expanded to
# [b s k, h]) put stage 0 at ~113 GiB per GPU (simulator.memory.per_gpu), over the H800's 80 GB, and Megatron's
# selective recompute (core attention only) does not remove them. The paper gives no recompute flags. One
# setting at every scale, as a run script keeps it; recomputing only as many layers as fit
# (recompute_to_fit) instead made Megatron-LM speed up with DP (ZeRO frees memory), 11.5-16% over Table 3,
# where every layer recomputed gives +1.2% at 240 and 1,440 GPUs.
# DP/PP overlap as MegaScale's (paper Sec. 6).
MEGATRON_LM = LayoutSpec(
    "megatron-lm",
    attention="tp",
    ffn="tp",
    inter_op_overlap=False,
    intra_op_overlap=False,
    expert_gemm="sequential",
    host_sync_per_moe_layer=True,
    fused_permute=False,
    recompute="full",
    grad_sync="fp32-rs",
    tp_async_backward=True,
)

# Table 5 ablation: MegaScale-MoE's own kernels, stepping from TP+TP without overlap to the full system.
TP_TP = MEGASCALE_MOE.with_(name="tp-tp", attention="tp", ffn="tp", inter_op_overlap=False, intra_op_overlap=False)
SP_EP = MEGASCALE_MOE.with_(name="sp-ep", inter_op_overlap=False, intra_op_overlap=False)
SP_EP_INTER = MEGASCALE_MOE.with_(name="sp-ep-inter", intra_op_overlap=False)
SP_EP_INTER_INTRA = MEGASCALE_MOE.with_(name="sp-ep-inter-intra")

# DeepSeek-V3 report Sec. 3.2: PP 16 (DualPipe; plain 1F1B here), 64-way EP over 8 nodes, no TP: attention
# is data parallel (intra_size 1), node-limited routing to at most 4 nodes, ZeRO-1, FP8 GEMMs (Sec. 3.3) and an
# FP8 dispatch (Sec. 3.3.3).
# Dispatch is DeepEP's all-to-all (no AG for top-8); no fused GEMM + collective (intra-op overlap off).
# Recompute is MegaScale-MoE's SAR, inherited: the dispatch is sent again in backward. DeepSeek-V3 itself
# recomputes only RMSNorm and the MLA up-projections (Sec. 3.2.3) and so keeps what the dispatch received
# (keep_dispatch=True, at k = 8 more units of bsh per layer; the FP8 activation caching of Sec. 3.3.3 that
# makes that fit is not modelled).
DEEPSEEK_V3 = MEGASCALE_MOE.with_(
    name="deepseek-v3",
    intra_size=1,
    pp=16,
    ep=64,
    ep_max_nodes=4,
    intra_op_overlap=False,
    a2a_topk_threshold=8,
    gemm_dtype="fp8",
    comm_dtype="fp8",  # Sec. 3.3.3: activations quantized to FP8 before the dispatch; the combine stays BF16
    uneven_pp=True,
    # Sec. 2.1.2, "No Token-Dropping": "DeepSeek-V3 does not drop any tokens during training" (no capacity padding)
    dropless=True,
)

LAYOUT_PRESETS: dict[str, LayoutSpec] = {
    layout.name: layout
    for layout in (MEGASCALE_MOE, MEGATRON_LM, TP_TP, SP_EP, SP_EP_INTER, SP_EP_INTER_INTRA, DEEPSEEK_V3)
}


def layout_preset(name: str) -> LayoutSpec:
    """The preset called ``name``, or a ConfigError that lists the choices."""
    return lookup_preset("layout", LAYOUT_PRESETS, name)
