"""Megatron-LM / Megatron-Core training arguments as a moesim job (``parse_megatron_args``): the layout,
the batch, the sequence length, the precision and model overrides, plus the flags it ignores and why.

Every layout field a Megatron flag maps to takes the flag's value or Megatron-Core's default for it (a Megatron run
without ``--moe-grouped-gemm`` runs SequentialMLP, without ``--use-distributed-optimizer`` keeps the optimizer
unsharded, ...); the fields Megatron has no flag for (routing skew, FP8 communication, recompute_to_fit, ...) come
from the base layout, megascale-moe's LayoutSpec defaults unless ``--layout`` names another. Model flags override the
base model only where present. Rules Megatron-Core asserts between flags are ConfigErrors naming the flag. Sources:
NVIDIA/Megatron-LM commit d98e8a64ddf34856e74b24714e3bedb2f5a39553 (megatron/training/arguments.py ``validate_args``,
megatron/core/transformer/transformer_config.py, megatron/core/model_parallel_config.py,
megatron/core/optimizer/optimizer_config.py); the README's "Megatron-LM arguments" table lists each flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from topologies.errors import ConfigError
from workloads.inputs import megatron_model
from workloads.inputs import megatron_precision as precision
from workloads.inputs.megatron_args import FIELD_FLAGS, UNKNOWN, IgnoredArg, parse_arguments, positive, read_text
from workloads.inputs.megatron_fsdp import (
    data_parallel_fields,
    fsdp_fp8_param_gather,
    megatron_fsdp_grads_dtype,
    offload_fields,
)
from workloads.inputs.megatron_graphs import (
    cuda_graphs,
    flex_dispatcher_sms,
    granularity,
    rank_capacity,
    router_padding,
)
from workloads.inputs.megatron_legacy import modernized
from workloads.inputs.megatron_pipeline import pipeline_fields
from workloads.inputs.shell_script import command_words
from workloads.specs.hints import in_megatron_words
from workloads.specs.layouts import RECOMPUTE_MODULES, LayoutSpec
from workloads.specs.models import ModelSpec


class MegatronRun(NamedTuple):
    """A job resolved against a base model and layout: what ``simulate`` takes, and what to report."""

    model: ModelSpec
    layout: LayoutSpec
    global_batch: int | None  # None: Megatron's default, micro-batch x data-parallel size (global_batch_for)
    seq_len: int | None
    ignored: tuple[IgnoredArg, ...]
    notes: tuple[str, ...]  # where moesim simulates something other than what Megatron would run


@dataclass(frozen=True)
class MegatronJob:
    """What a Megatron command line sets: layout fields, model field overrides, batch and sequence."""

    layout_fields: dict[str, Any]
    model_overrides: dict[str, Any]
    global_batch: int | None
    seq_len: int | None
    ignored: tuple[IgnoredArg, ...]
    notes: tuple[str, ...] = ()
    args: dict[str, Any] = field(default_factory=dict, repr=False)  # typed flag values, for resolve()

    @property
    def unknown(self) -> list[str]:
        """Flags moesim does not know (each also in ``ignored``)."""
        return [arg.flag for arg in self.ignored if arg.reason == UNKNOWN]

    def resolve(
        self, base_model: ModelSpec, base_layout: LayoutSpec | None = None, num_gpus: int | None = None
    ) -> MegatronRun:
        """The model (base with the overrides and Megatron's derived fields) and the layout (base with the
        fields, the pipeline split and the recomputed layers, which need the model's layer count)."""
        notes, ignored = list(self.notes), list(self.ignored)
        model = megatron_model.apply(self.args, self.model_overrides, base_model, notes, ignored)
        megatron_model.check_divisible(self.args, model)
        fields = {**self.layout_fields, **pipeline_fields(self.args, model, self.layout_fields, notes)}
        _ep_overlap(fields, ignored)
        fields.update(self._etp_that_fits(fields, num_gpus, notes))
        if model.num_experts and not self.args.get("--moe-grouped-gemm"):
            notes.append(megatron_model.SEQUENTIAL_MLP_NOTE)
        base = base_layout or LayoutSpec("megatron-args")
        layout = base.with_(name="megatron-args" if base_layout is None else f"{base.name}+megatron-args", **fields)
        return MegatronRun(model, layout, self.global_batch, self.seq_len, tuple(ignored), tuple(notes))

    def _etp_that_fits(self, fields: dict[str, Any], num_gpus: int | None, notes: list[str]) -> dict[str, Any]:
        """ETP 1 where Megatron-Core's default ETP (= TP) makes EP x ETP overflow a stage's GPUs.

        Megatron would refuse such a job; the launch lines that run set --expert-tensor-parallel-size 1, so
        moesim simulates that and says so (a note in the report)."""
        etp, ep, pp = fields.get("etp", 1), fields.get("ep", 0), fields.get("pp", 1)
        if num_gpus is None or etp == 1 or "--expert-tensor-parallel-size" in self.args or not ep:
            return {}
        if (num_gpus // pp) % (ep * etp) == 0:
            return {}
        notes.append(
            f"Megatron-Core's default --expert-tensor-parallel-size (= TP {etp}) makes EP {ep} x ETP {etp} overflow "
            f"the {num_gpus // pp} GPUs of a stage, so Megatron would refuse this job; simulated with ETP 1 "
            "(add --expert-tensor-parallel-size 1 to say so)"
        )
        return {"etp": 1}

    def global_batch_for(self, num_gpus: int) -> int:
        """``--global-batch-size``, or Megatron's default: micro-batch x data-parallel size."""
        if self.global_batch is not None:
            return self.global_batch
        fields = self.layout_fields
        return fields["micro_batch"] * max(num_gpus // (fields["intra_size"] * fields["cp"] * fields["pp"]), 1)

    def explain(self, error: ConfigError) -> ConfigError:
        """``error`` with the Megatron flags behind its field named, when there are some."""
        rule = in_megatron_words(error.rule)  # its hint in Megatron's flags (workloads/specs/hints.py MEGATRON_CUTS)
        flags = None if error.field == "memory" else FIELD_FLAGS.get(error.field)
        changed = flags or rule != error.rule
        return ConfigError(f"{error.field} ({flags})" if flags else error.field, rule) if changed else error


def parse_megatron_args(text_or_path: str | Path) -> MegatronJob:
    """Read Megatron-LM arguments (inline ``--flags`` or a file holding them, or a whole launch line)."""
    command = command_words(read_text(text_or_path))
    args, ignored = parse_arguments(command.words)
    notes: list[str] = []
    args = modernized(args, notes)  # 2021-22 spellings (--checkpoint-activations, --DDP-impl) as today's flags
    if command.unresolved:
        names = ", ".join(dict.fromkeys(command.unresolved))
        notes.append(f"shell variables the script does not set, left as written: {names}")
    extra: list[IgnoredArg] = []
    fields = {
        **_parallel(args, notes),
        **_experts(args, notes),
        **_router(args, notes),
        "cross_entropy": _cross_entropy(args),
        # bias_activation_fusion: on unless --no-bias-swiglu-fusion (SwiGLU) or --no-bias-gelu-fusion (otherwise; off
        # without biases: arguments.py validate_args), dense MLPs and experts alike (argument_utils.py)
        "fused_activation": _fused_activation(args),
        "attention_backend": _attention_backend(args),
        **_recompute(args, extra),
        **_precision(args, extra, notes),
        **precision.optimizer_fields(args, notes),
        **precision.bf16_layer_fields(args, notes),
        **precision.module_precision_fields(args, text_or_path),
        **data_parallel_fields(args, notes),
        **offload_fields(args, notes),
        **cuda_graphs(args, notes),
    }
    overrides = megatron_model.overrides(args, extra)
    if args.get("--quick-geglu"):  # GPT-OSS: a gated linear unit like SwiGLU (3 matrices), quick-GeLU gate
        notes.append("--quick-geglu: its elementwise kernels timed as SwiGLU's")
    return MegatronJob(
        fields,
        overrides,
        positive(args, "--global-batch-size", None),
        positive(args, "--seq-length", None),
        (*ignored, *extra),
        tuple(notes),
        args,
    )


def _parallel(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """TP (moesim's TP attention over intra_size GPUs), PP, CP and the micro-batch."""
    tp = positive(args, "--tensor-model-parallel-size", 1)
    # arguments.py validate_args turns sequence parallelism off at TP 1, then asserts it under --tp-comm-overlap
    if args.get("--tp-comm-overlap") and not (args.get("--sequence-parallel") and tp > 1):
        raise ConfigError("--tp-comm-overlap", "needs --sequence-parallel with TP > 1 (Megatron-LM)")
    if any(kind != "p2p" for kind in args.get("--cp-comm-type", ("p2p",))):
        notes.append("--cp-comm-type other than p2p: moesim simulates CP as the p2p ring")
    return {
        "attention": "tp",
        "intra_size": tp,
        "pp": positive(args, "--pipeline-model-parallel-size", 1),
        "cp": positive(args, "--context-parallel-size", 1),
        "micro_batch": positive(args, "--micro-batch-size", 1),
        # without --sequence-parallel every TP rank keeps the whole sequence and the TP blocks all-reduce
        "sequence_parallel": tp == 1 or bool(args.get("--sequence-parallel")),
        # TE userbuffers: the TP collectives of attention and dense MLPs overlapped with their GEMMs
        "tp_comm_overlap": bool(args.get("--tp-comm-overlap")),
        # without userbuffers Megatron-Core's TP layers still overlap their backward re-gather and reduce-scatter
        "tp_async_backward": tp > 1,
        "pp_scatter_gather": tp > 1 and not args.get("--no-scatter-gather-tensors-in-pipeline"),  # megatron_legacy
    }


def _experts(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """EP x ETP carved out of DP x CP, the token dispatcher, capacity, expert GEMMs and group-limited routing.

    ETP defaults to TP (ModelParallelConfig.__post_init__); Megatron then needs EP x ETP to divide the GPUs
    of a stage, and so does moesim (workloads.specs.validation), which also needs EP x ETP to be a multiple of TP:
    ``--expert-tensor-parallel-size 1`` is the usual fix. EP 1 with ETP = TP is moesim's ffn "tp"."""
    tp = args.get("--tensor-model-parallel-size", 1)
    ep = positive(args, "--expert-model-parallel-size", 1)
    etp = positive(args, "--expert-tensor-parallel-size", tp)
    dispatcher = args.get("--moe-token-dispatcher-type", "allgather")  # TransformerConfig default
    if args.get("--moe-enable-deepep") and dispatcher != "flex":
        raise ConfigError("--moe-enable-deepep", "DeepEP is only supported with --moe-token-dispatcher-type flex")
    if args.get("--moe-shared-expert-overlap") and dispatcher == "allgather":
        raise ConfigError("--moe-shared-expert-overlap", "only works with the alltoall or flex token dispatcher")
    backend = args.get("--moe-flex-dispatcher-backend", "deepep")  # TransformerConfig default
    if dispatcher == "flex" and backend == "ncclep":
        notes.append("flex dispatcher with the ncclep backend: simulated as the flex dispatcher with DeepEP")
    if args.get("--moe-shared-expert-overlap"):
        notes.append("--moe-shared-expert-overlap as inter_op_overlap: the other collectives also run beside compute")
    budget = rank_capacity(args, dispatcher, backend, notes)
    ffn = "ep" if ep > 1 or tp == 1 or etp != tp else "tp"
    capacity = args.get("--moe-expert-capacity-factor")
    capacity = None if capacity is not None and capacity < 0 else capacity  # Megatron: negative = dropless
    pad = bool(args.get("--moe-pad-expert-input-to-capacity"))
    if pad and capacity is None:
        raise ConfigError("--moe-pad-expert-input-to-capacity", "needs --moe-expert-capacity-factor")
    if pad and dispatcher == "flex" and backend == "deepep":  # transformer_config.py __post_init__ at d98e8a64dd
        raise ConfigError("--moe-pad-expert-input-to-capacity", "the flex dispatcher's deepep backend refuses it")
    if capacity is not None and dispatcher == "flex" and backend == "ncclep":  # token_dispatcher.py _NCCLEPManager
        raise ConfigError(
            "--moe-expert-capacity-factor", "the flex dispatcher's ncclep backend has no drop and pad yet"
        )
    hybridep = dispatcher == "flex" and backend == "hybridep"
    if capacity is not None and capacity < 1.0:
        raise ConfigError("--moe-expert-capacity-factor", f"{capacity} < 1 drops tokens: not modelled (use >= 1)")
    if capacity is not None and not pad:
        notes.append("capacity factor without padding: expert GEMMs run on the tokens received (dropless)")
    groups, group_topk = args.get("--moe-router-num-groups"), args.get("--moe-router-group-topk")
    if (groups is None) != (group_topk is None):
        raise ConfigError("--moe-router-group-topk", "group-limited routing needs it and --moe-router-num-groups")
    if group_topk is not None and not 1 <= group_topk <= groups:
        raise ConfigError("--moe-router-group-topk", f"must be in 1 .. --moe-router-num-groups = {groups}")
    if groups is not None:
        notes.append(f"group-limited routing: the {groups} expert groups taken as the EP group's nodes")
    fields: dict[str, Any] = {
        "ffn": ffn,
        "ep": ep if ffn == "ep" else 0,
        "etp": etp if ffn == "ep" else 1,
        # the token dispatcher object (workloads/dispatchers): its copies, transport, kernels and syncs
        "token_dispatcher": token_dispatcher_name(dispatcher, backend),
        "dispatcher_sms": flex_dispatcher_sms(args, dispatcher, backend, notes),
        # Megatron-Core with TE runs --moe-grouped-gemm as TEGroupedMLP, TE's GroupedLinear (workloads/specs/layouts.py)
        "expert_gemm": "multi_stream" if args.get("--moe-grouped-gemm") else "sequential",
        "fused_permute": bool(args.get("--moe-permute-fusion")),
        "router_quant_padding": router_padding(args, notes),
        # token_dispatcher.py at d98e8a64dd: drop-and-pad fixes the tokens per expert on the host for the all-to-all
        # dispatcher and for HybridEP (_HybridEPManager.setup_metadata: num_permuted_tokens = capacity x EP x local
        # experts, no device-to-host copy), and so does the flex dispatcher's static per-rank budget
        # (--moe-expert-rank-capacity-factor); every other dispatcher waits for the counts each MoE layer
        "host_sync_per_moe_layer": not (pad and (dispatcher == "alltoall" or hybridep)) and not budget,
        "capacity_factor": capacity or 1.0,
        "dropless": ffn == "ep" and not pad,
        "ep_max_nodes": group_topk or 0,
        # the shared experts run beside the dispatch on its own stream; without it Megatron runs them in turn
        "inter_op_overlap": bool(args.get("--moe-shared-expert-overlap")),
        "intra_op_overlap": False,  # MegaScale-MoE's fused collectives; TE's userbuffers are tp_comm_overlap
        "ep_overlap": bool(args.get("--overlap-moe-expert-parallel-comm")),
        "delay_wgrad": bool(args.get("--delay-wgrad-compute")),
    }
    if budget and ffn == "ep":
        fields.update(budget)
    if args.get("--moe-router-force-load-balancing"):
        fields["routing"] = "uniform"
    return fields


def token_dispatcher_name(dispatcher: str, backend: str) -> str:
    """The workloads/dispatchers registry name of --moe-token-dispatcher-type (and the flex backend)."""
    if dispatcher != "flex":
        return dispatcher
    return "flex-hybridep" if backend == "hybridep" else "flex-deepep"


AUX_LOSS_TYPES = ("aux_loss", "seq_aux_loss", "global_aux_loss")


def _router(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The router's kernels after its GEMM (workloads/recipes/router.py): TE's fused router, the load-balancing loss
    and the random logits of benchmark routing.

    A loss type is on when its coefficient is > 0: one coefficient for one type, else the i-th for the i-th
    (TopKRouter.get_aux_loss_coeff, megatron/core/transformer/moe/router.py at core_v0.18.0; defaults
    ``aux_loss`` and 0.0, TransformerConfig)."""
    types = args.get("--moe-router-load-balancing-type", ("aux_loss",))
    texts = args.get("--moe-aux-loss-coeff", ("0",))
    try:
        coeffs = [float(text) for text in texts]
    except ValueError:
        raise ConfigError("--moe-aux-loss-coeff", f"must be numbers, got {' '.join(texts)!r}") from None
    if len(types) > 1 and len(coeffs) != len(types):
        raise ConfigError("--moe-aux-loss-coeff", f"needs one value per load-balancing type ({len(types)})")
    on = {kind for i, kind in enumerate(types) if kind in AUX_LOSS_TYPES and coeffs[i if len(types) > 1 else 0] > 0}
    fused = bool(args.get("--moe-router-fusion"))
    if others := sorted(on - {"aux_loss"}):
        notes.append(f"router losses {', '.join(others)}: their kernels are not declared (workloads/recipes/router.py)")
    if "aux_loss" in on and not fused:
        notes.append("unfused router: its aux-loss kernels are not declared (workloads/recipes/router.py)")
    return {
        "router_fusion": fused,
        "router_aux_loss": "aux_loss" in on,
        "router_random_logits": bool(args.get("--moe-router-force-load-balancing")),
    }


def _fused_activation(args: dict[str, Any]) -> bool:
    """Megatron's bias_activation_fusion: --bias-swiglu-fusion under --swiglu, else --bias-gelu-fusion, which
    --disable-bias-linear turns off (argument_utils.py core_transformer_config_from_args, arguments.py validate_args
    at d98e8a64dd); under --squared-relu, --use-fused-weighted-squared-relu. Flags that leave the model's FFN as it is
    (megatron_model.ffn_activation) take the SwiGLU's."""
    activation = megatron_model.ffn_activation(args)
    if activation in ("swiglu", ""):
        return not args.get("--no-bias-swiglu-fusion")
    if activation == "squared_relu":  # the experts' weighted kernel (experts.py); a dense MLP's is one jit kernel
        return bool(args.get("--use-fused-weighted-squared-relu"))
    return not (args.get("--no-bias-gelu-fusion") or args.get("--disable-bias-linear"))


def _attention_backend(args: dict[str, Any]) -> str:
    """The attention kernel Megatron-Core's TE attention runs. Defaults: transformer_impl transformer_engine,
    attention_backend auto (megatron/core/transformer/transformer_config.py at core_v0.17.0). With both flash
    and fused attention available, TE gives FusedAttention (cuDNN) preference on Hopper+ "for performance
    reasons" (TransformerEngine transformer_engine/pytorch/attention/dot_product_attention/utils.py
    get_attention_backend, v2.12 and v2.14), and it alone runs GPT-OSS's learnable softmax (TE PR #2148): "cudnn".
    --attention-backend flash keeps the calibration's FlashAttention. A local (non-TE) layer runs Megatron-Core's
    DotProductAttention (gpt_layer_specs.py get_gpt_layer_local_spec) and --attention-backend unfused / local TE's
    UnfusedDotProductAttention or that one: "unfused", the s x s scores materialized."""
    impl = args.get("--transformer-impl") or "transformer_engine"
    backend = args.get("--attention-backend") or "auto"
    if impl == "local" or backend in ("unfused", "local"):
        return "unfused"
    return "" if impl != "transformer_engine" or backend == "flash" else "cudnn"


def _cross_entropy(args: dict[str, Any]) -> str:
    """TE's cross-entropy kernels under --cross-entropy-loss-fusion --cross-entropy-fusion-impl te
    (workloads/recipes/cross_entropy.py); the fused "native" impl (Megatron's default) and the unfused loss keep the
    assumed FP32 passes ("")."""
    fused = args.get("--cross-entropy-loss-fusion")
    return "te" if fused and args.get("--cross-entropy-fusion-impl") == "te" else ""


def _ep_overlap(fields: dict[str, Any], ignored: list[IgnoredArg]) -> None:
    """--overlap-moe-expert-parallel-comm needs EP > 1 and, with PP > 1, virtual stages, and the alltoall or flex
    dispatcher; --delay-wgrad-compute needs it (Megatron-LM asserts them): a flag whose requirement fails is listed and
    dropped."""
    if fields["ep_overlap"] and (fields["ep"] <= 1 or (fields["pp"] > 1 and fields["virtual_stages"] == 1)):
        reason = "needs --expert-model-parallel-size > 1 and, with PP > 1, virtual stages (Megatron-Core)"
        ignored.append(IgnoredArg("--overlap-moe-expert-parallel-comm", reason))
        fields["ep_overlap"] = False
    if fields["ep_overlap"] and fields["token_dispatcher"] == "allgather":  # transformer_config.py at d98e8a64dd
        reason = "needs the alltoall or flex token dispatcher (Megatron-Core)"
        ignored.append(IgnoredArg("--overlap-moe-expert-parallel-comm", reason))
        fields["ep_overlap"] = False
    if fields["delay_wgrad"] and not fields["ep_overlap"]:
        ignored.append(IgnoredArg("--delay-wgrad-compute", "needs --overlap-moe-expert-parallel-comm (Megatron-Core)"))
        fields["delay_wgrad"] = False


def _recompute(args: dict[str, Any], ignored: list[IgnoredArg]) -> dict[str, Any]:
    """--recompute-granularity full (method block / uniform) or selective (--recompute-modules, default
    core_attn: TransformerConfig.__post_init__); none without it."""
    level = granularity(args)
    method, layers = args.get("--recompute-method"), args.get("--recompute-num-layers")
    if level is None:
        for flag in ("--recompute-method", "--recompute-num-layers", "--recompute-modules"):
            if flag in args:
                ignored.append(IgnoredArg(flag, "no --recompute-granularity: nothing is recomputed"))
        return {"recompute": "none", "recompute_modules": (), "recompute_kept_layers": 0}
    if level == "full":
        if method is None or layers is None:
            raise ConfigError("--recompute-method", "full recomputation needs --recompute-method and -num-layers")
        if layers < 1:
            raise ConfigError("--recompute-num-layers", f"must be >= 1, got {layers}")
        return {"recompute": "full", "recompute_modules": ()}  # kept layers: _pipeline (block method)
    if method is not None or layers is not None:
        raise ConfigError("--recompute-method", "selective recomputation takes no method or number of layers")
    modules = args.get("--recompute-modules", ("core_attn",))
    for module in modules:
        if module not in RECOMPUTE_MODULES:
            raise ConfigError("--recompute-modules", f"{module!r} not modelled; moesim models {RECOMPUTE_MODULES}")
    if "mhc" in modules and "mlp" in modules:  # TransformerConfig.__post_init__ at d98e8a64
        raise ConfigError("--recompute-modules", "'mhc' and 'mlp' cannot be used together (Megatron-Core)")
    if "moe_act" in modules and not args.get("--moe-grouped-gemm"):
        raise ConfigError("--recompute-modules", "moe_act is only supported with --moe-grouped-gemm")
    shared = args.get("--moe-shared-expert-intermediate-size")
    if "shared_experts" in modules and shared and args.get("--moe-shared-expert-overlap"):
        raise ConfigError("--recompute-modules", "shared_experts does not work with --moe-shared-expert-overlap")
    delayed = args.get("--fp8-format") and args.get("--fp8-recipe", "delayed") == "delayed"
    if delayed and {"moe_act", "layernorm"} & set(modules):
        raise ConfigError("--recompute-modules", "delayed FP8 scaling supports no moe_act / layernorm recompute")
    return {"recompute": "selective", "recompute_modules": tuple(dict.fromkeys(modules)), "recompute_kept_layers": 0}


def _precision(args: dict[str, Any], ignored: list[IgnoredArg], notes: list[str]) -> dict[str, Any]:
    """16-bit training, FP8 GEMMs and weights, and the optimizer's storage dtypes (OptimizerConfig)."""
    if args.get("--bf16") and args.get("--fp16"):
        raise ConfigError("--fp16", "--bf16 and --fp16 exclude each other")
    if not (args.get("--bf16") or args.get("--fp16")):
        notes.append("no --bf16 or --fp16: Megatron would keep FP32 weights; moesim simulates BF16 training")
    fsdp2 = args.get("--use-torch-fsdp2")  # FSDP2 gathers BF16
    fp8 = args.get("--fp8-format")
    recipe = args.get("--fp8-recipe", "delayed")  # TransformerConfig default
    if fp8 and recipe == "custom":
        raise ConfigError("--fp8-recipe", "custom recipes are not modelled")
    if not fp8 and "--fp8-recipe" in args:
        ignored.append(IgnoredArg("--fp8-recipe", "no --fp8-format: BF16 GEMMs"))
    if args.get("--fp8-param-gather"):
        if not fp8:
            raise ConfigError("--fp8-param-gather", "needs --fp8-format")
        fsdp_fp8_param_gather(args, notes)  # with the distributed optimizer or FSDP; FSDP2 gathers BF16
    fp4 = args.get("--fp4-format")  # NVFP4, exclusive with FP8 (Megatron-LM d98e8a64 validate_args): one recipe here
    if fp4 and fp8:
        raise ConfigError("--fp4-format", "--fp4-format and --fp8-format cannot be used simultaneously")
    if args.get("--fp4-param-gather") and not fp4:  # megatron/training/arguments.py validate_args
        raise ConfigError("--fp4-param-gather", "must be used together with --fp4-format.")
    if not fp4 and "--fp4-recipe" in args:
        ignored.append(IgnoredArg("--fp4-recipe", "no --fp4-format: no FP4 GEMMs"))
    fp8, recipe = (fp4, "nvfp4") if fp4 else (fp8, recipe)
    aware = bool(args.get("--use-precision-aware-optimizer"))
    dtypes = {
        "main_grads_dtype": args.get("--main-grads-dtype", "fp32"),
        "main_params_dtype": args.get("--main-params-dtype", "fp32"),
        "exp_avg_dtype": args.get("--exp-avg-dtype", "fp32"),
        "exp_avg_sq_dtype": args.get("--exp-avg-sq-dtype", "fp32"),
    }
    if unaware := [name for name, dtype in dtypes.items() if dtype != "fp32" and not aware]:
        flag = "--" + unaware[0].replace("_", "-")
        raise ConfigError(flag, "can only be fp32 without --use-precision-aware-optimizer (OptimizerConfig)")
    dtypes["main_grads_dtype"] = precision.ddp_grads_dtype(args, dtypes["main_grads_dtype"])
    if args.get("--use-megatron-fsdp"):  # Megatron FSDP keeps gradient buffers of its own dtype
        dtypes["main_grads_dtype"] = megatron_fsdp_grads_dtype(args, notes)
    # TE FusedAdam keeps 16-bit remainders of FP32 master weights (store_param_remainders, default True)
    # when it manages them: BF16 weights, FP32 main params, no FP8 recipe other than delayed.
    remainders = aware and bool(args.get("--bf16")) and dtypes["main_params_dtype"] == "fp32"
    remainders = remainders and (not fp8 or recipe == "delayed")
    return {
        **dtypes,
        "gemm_dtype": "fp8" if fp8 else "bf16",
        "fp8_recipe": recipe if fp8 else "",
        "fp8_param_gather": bool(args.get("--fp8-param-gather") or args.get("--fp4-param-gather")) and not fsdp2,
        "param_remainders": remainders,
    }
