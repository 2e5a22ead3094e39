"""Megatron-LM training arguments as flags and values: read as a shell reads a command line, typed by the
flags moesim models, and the reasons it ignores the others.

Flag names, types, choices and defaults follow megatron/training/arguments.py and the Megatron-Core
configs its parser is generated from (megatron/core/transformer/transformer_config.py,
megatron/core/model_parallel_config.py, megatron/core/optimizer/optimizer_config.py) at NVIDIA/Megatron-LM
commit d98e8a64ddf34856e74b24714e3bedb2f5a39553.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from topologies.errors import ConfigError
from workloads.inputs.bounded_read import read_bounded
from workloads.inputs.megatron_flag_list import (  # noqa: F401 (re-exported: the reasons' names)
    NOT_MODELLED,
    NOT_SIMULATED,
    UNKNOWN,
    ignored_reason,
    reason_class,
)
from workloads.inputs.megatron_precision import OPTIMIZER_CHOICES
from workloads.inputs.shell_script import command_words
from workloads.specs.limits import check_limit
from workloads.specs.memory_options import OFFLOAD_MODULES
from workloads.specs.muon import MUON_TP_MODES

SOURCE = "--megatron-args"
INT_MAX = 2**31 - 1


class Kind(Enum):
    """How a flag takes its value (argparse's action / type / nargs in Megatron's parser)."""

    SWITCH = "store_true"
    INT = "int"
    FLOAT = "float"
    TEXT = "str"
    TEXTS = "str nargs=+"


@dataclass(frozen=True)
class Flag:
    """A Megatron flag moesim reads: its kind and, for text, its choices (empty: any text)."""

    kind: Kind
    choices: tuple[str, ...] = ()


S, I, F, T, TS = Kind.SWITCH, Kind.INT, Kind.FLOAT, Kind.TEXT, Kind.TEXTS
DTYPES = ("fp32", "fp16", "bf16", "fp8")

# Flags that define the layout, the batch, the sequence, the precision or the model.
FLAGS: dict[str, Flag] = {
    # parallel layout (ModelParallelConfig, arguments.py _add_distributed_args)
    "--tensor-model-parallel-size": Flag(I),
    "--sequence-parallel": Flag(S),
    "--pipeline-model-parallel-size": Flag(I),
    "--num-virtual-stages-per-pipeline-rank": Flag(I),
    "--num-layers-per-virtual-pipeline-stage": Flag(I),
    "--microbatch-group-size-per-virtual-pipeline-stage": Flag(I),
    "--pipeline-model-parallel-layout": Flag(T),
    "--decoder-first-pipeline-num-layers": Flag(I),
    "--decoder-last-pipeline-num-layers": Flag(I),
    "--account-for-embedding-in-pipeline-split": Flag(S),
    "--account-for-loss-in-pipeline-split": Flag(S),
    "--no-overlap-p2p-communication": Flag(S),  # overlap_p2p_comm defaults to True (arguments.py)
    "--tp-comm-overlap": Flag(S),
    # CUDA graphs (arguments.py _add_training_args; TransformerConfig.cuda_graph_impl): --cuda-graph-impl and its
    # scopes (--cuda-graph-modules, formerly --cuda-graph-scope, hidden since e41b37002c #4292); the legacy switches
    # --enable-cuda-graph (local) and --external-cuda-graph (transformer_engine); full_iteration needs the NaN
    # check off (validate_args), which --fp16 without --loss-scale turns off itself
    "--cuda-graph-impl": Flag(T, ("none", "local", "transformer_engine", "full_iteration")),
    "--cuda-graph-scope": Flag(TS),
    "--cuda-graph-modules": Flag(TS),
    "--enable-cuda-graph": Flag(S),
    "--external-cuda-graph": Flag(S),
    "--no-check-for-nan-in-loss-and-grad": Flag(S),
    "--loss-scale": Flag(F),
    "--context-parallel-size": Flag(I),
    "--cp-comm-type": Flag(TS, ("p2p", "a2a", "allgather", "a2a+p2p")),
    "--expert-model-parallel-size": Flag(I),
    "--expert-tensor-parallel-size": Flag(I),
    # batch and sequence
    "--micro-batch-size": Flag(I),
    "--global-batch-size": Flag(I),
    "--seq-length": Flag(I),
    # precision
    "--bf16": Flag(S),
    "--fp16": Flag(S),
    "--fp8-format": Flag(T, ("e4m3", "hybrid")),
    "--fp8-recipe": Flag(T, ("tensorwise", "delayed", "mxfp8", "blockwise", "custom")),
    "--fp8-param-gather": Flag(S),
    "--fp4-format": Flag(T, ("e2m1",)),
    "--fp4-recipe": Flag(T, ("nvfp4",)),
    # MoE layer
    "--moe-token-dispatcher-type": Flag(T, ("allgather", "alltoall", "flex")),
    "--moe-enable-deepep": Flag(S),
    "--moe-flex-dispatcher-backend": Flag(T, ("deepep", "hybridep", "ncclep")),
    # a static per-rank token budget for the flex dispatcher's hybridep / ncclep backends (TransformerConfig
    # moe_expert_rank_capacity_factor): no host sync; hybridep needs the TE op fuser or grouped tensors
    "--moe-expert-rank-capacity-factor": Flag(F),
    "--use-transformer-engine-op-fuser": Flag(S),
    # SMs of the flex dispatcher's dispatch / combine kernels, and the deprecated per-backend names routed into it
    # (TransformerConfig.moe_flex_dispatcher_num_sms, __post_init__; workloads/inputs/megatron_graphs.py)
    "--moe-flex-dispatcher-num-sms": Flag(I),
    "--moe-deepep-num-sms": Flag(I),
    "--moe-hybridep-num-sms": Flag(I),
    "--moe-use-grouped-tensor": Flag(S),
    "--moe-paged-stash": Flag(S),
    "--moe-paged-stash-buffer-size-factor-cuda": Flag(F),
    "--moe-router-num-groups": Flag(I),
    "--moe-router-group-topk": Flag(I),
    "--moe-router-force-load-balancing": Flag(S),
    "--moe-router-fusion": Flag(S),
    "--moe-router-load-balancing-type": Flag(TS, ("aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "none")),
    "--moe-aux-loss-coeff": Flag(TS),
    # the attention kernel (TransformerConfig transformer_impl, attention_backend; workloads/inputs/megatron.py)
    "--transformer-impl": Flag(T, ("local", "transformer_engine", "inference_optimized")),
    "--attention-backend": Flag(T, ("flash", "fused", "unfused", "local", "auto")),
    # the loss (arguments.py _add_training_args)
    "--cross-entropy-loss-fusion": Flag(S),
    "--cross-entropy-fusion-impl": Flag(T, ("native", "te")),
    "--moe-expert-capacity-factor": Flag(F),
    "--moe-pad-expert-input-to-capacity": Flag(S),
    "--moe-grouped-gemm": Flag(S),
    # the router pads each expert's tokens to the FP8 / FP4 alignment (TransformerConfig
    # moe_router_padding_for_quantization; --moe-router-padding-for-fp8 its deprecated alias, __post_init__)
    "--moe-router-padding-for-quantization": Flag(S),
    "--moe-router-padding-for-fp8": Flag(S),
    "--moe-permute-fusion": Flag(S),
    "--no-bias-swiglu-fusion": Flag(S),
    "--no-bias-gelu-fusion": Flag(S),
    "--disable-bias-linear": Flag(S),  # no biases: no bias-GeLU fusion (megatron.py _fused_activation)
    "--no-rope-fusion": Flag(S),
    "--moe-shared-expert-overlap": Flag(S),
    "--overlap-moe-expert-parallel-comm": Flag(S),
    "--delay-wgrad-compute": Flag(S),
    # recomputation
    "--recompute-granularity": Flag(T, ("full", "selective")),
    "--recompute-method": Flag(T, ("uniform", "block")),
    "--recompute-num-layers": Flag(I),
    "--recompute-modules": Flag(TS),
    "--recompute-activations": Flag(S),
    "--accumulate-allreduce-grads-in-fp32": Flag(S),  # FP32 gradient buffers in an --fp16 job (megatron_precision)
    "--merge-file": Flag(T),  # a BPE merges file: GPT-2's tokenizer where none is named (megatron_model)
    # optimizer and data parallelism
    "--optimizer": Flag(T, OPTIMIZER_CHOICES),
    "--muon-num-ns-steps": Flag(I),
    "--muon-tp-mode": Flag(T, MUON_TP_MODES),
    "--muon-fp32-matmul-prec": Flag(T, ("highest", "high", "medium")),
    "--fp4-param-gather": Flag(S),
    "--first-last-layers-bf16": Flag(S),
    "--num-layers-at-start-in-bf16": Flag(I),
    "--num-layers-at-end-in-bf16": Flag(I),
    "--te-precision-config-file": Flag(T),
    "--use-distributed-optimizer": Flag(S),
    # FSDP (workloads/inputs/megatron_fsdp.py): its sharding as a ZeRO stage
    "--use-megatron-fsdp": Flag(S),
    "--use-torch-fsdp2": Flag(S),
    "--data-parallel-sharding-strategy": Flag(T, ("no_shard", "optim", "optim_grads", "optim_grads_params")),
    "--megatron-fsdp-main-grads-dtype": Flag(T, ("fp32", "bf16", "fp16", "auto")),
    "--num-distributed-optimizer-instances": Flag(I),  # workloads/specs/hybrid_dp.py
    "--no-gradient-accumulation-fusion": Flag(S),  # workloads/graph/main_grad.py
    "--outer-dp-sharding-strategy": Flag(T, ("no_shard", "optim")),
    # activation offloading (workloads/specs/memory_options.py): memory only
    "--cpu-offloading-num-layers": Flag(I),
    "--fine-grained-activation-offloading": Flag(S),
    "--offload-modules": Flag(TS, OFFLOAD_MODULES),
    "--min-offloaded-tensor-size": Flag(I),
    "--overlap-grad-reduce": Flag(S),
    "--overlap-param-gather": Flag(S),
    "--no-align-param-gather": Flag(S),  # workloads/specs/layouts.py align_param_gather
    "--use-precision-aware-optimizer": Flag(S),
    "--main-grads-dtype": Flag(T, ("fp32", "bf16")),
    "--grad-reduce-in-bf16": Flag(S),
    "--main-params-dtype": Flag(T, ("fp32", "fp16")),
    "--exp-avg-dtype": Flag(T, DTYPES),
    "--exp-avg-sq-dtype": Flag(T, DTYPES),
    # model (TransformerConfig, arguments.py _add_network_size_args / _add_moe_args / _add_mla_args)
    "--num-layers": Flag(I),
    "--hidden-size": Flag(I),
    "--ffn-hidden-size": Flag(I),
    "--num-attention-heads": Flag(I),
    "--group-query-attention": Flag(S),
    "--num-query-groups": Flag(I),
    "--kv-channels": Flag(I),
    "--swiglu": Flag(S),
    "--hidden-dropout": Flag(F),
    "--attention-dropout": Flag(F),
    "--squared-relu": Flag(S),
    "--use-fused-weighted-squared-relu": Flag(S),
    "--num-experts": Flag(I),
    "--moe-router-topk": Flag(I),
    "--moe-ffn-hidden-size": Flag(I),
    "--moe-shared-expert-intermediate-size": Flag(I),
    "--moe-latent-size": Flag(I),
    "--moe-layer-freq": Flag(T),
    "--vocab-size": Flag(I),
    "--padded-vocab-size": Flag(I),
    "--tokenizer-type": Flag(T),  # GPT2BPETokenizer's vocabulary is GPT-2's (megatron_model.flags_model)
    "--make-vocab-size-divisible-by": Flag(I),
    "--untie-embeddings-and-output-weights": Flag(S),
    "--position-embedding-type": Flag(T),
    "--qk-layernorm": Flag(S),
    "--multi-latent-attention": Flag(S),
    "--q-lora-rank": Flag(I),
    "--kv-lora-rank": Flag(I),
    "--qk-head-dim": Flag(I),
    "--qk-pos-emb-head-dim": Flag(I),
    "--v-head-dim": Flag(I),
    "--mtp-num-layers": Flag(I),
    # DSA (--experimental-attention-variant dsa; TransformerConfig dsa_indexer_* at d98e8a64)
    "--experimental-attention-variant": Flag(T),
    "--dsa-indexer-n-heads": Flag(I),
    "--dsa-indexer-head-dim": Flag(I),
    "--dsa-indexer-topk": Flag(I),
    "--dsa-indexer-topk-freq": Flag(I),
    "--dsa-indexer-skip-topk-offset": Flag(I),
    # mHC (megatron/core/transformer/transformer_config.py enable_mhc_connections and its fields at d98e8a64)
    "--enable-mhc-connections": Flag(S),
    "--mhc-num-residual-streams": Flag(I),
    "--mhc-sinkhorn-iterations": Flag(I),
    # sliding windows and GPT-OSS's GLU (arguments.py _add_network_size_args; TransformerConfig)
    "--window-size": Flag(T),
    "--window-attn-skip-freq": Flag(T),
    "--quick-geglu": Flag(S),
    # hybrid models' layers (arguments.py _add_network_size_args, _add_experimental_args; workloads/specs/models.py)
    "--hybrid-override-pattern": Flag(T),
    "--hybrid-layer-pattern": Flag(T),
    "--is-hybrid-model": Flag(S),
    "--mamba-num-heads": Flag(I),
    "--mamba-head-dim": Flag(I),
    "--mamba-state-dim": Flag(I),
    "--mamba-num-groups": Flag(I),
    "--linear-num-key-heads": Flag(I),
    "--linear-num-value-heads": Flag(I),
    "--linear-key-head-dim": Flag(I),
    "--linear-value-head-dim": Flag(I),
    "--linear-conv-kernel-dim": Flag(I),
    "--attention-output-gate": Flag(S),
    "--mtp-hybrid-override-pattern": Flag(T),
    "--mtp-use-repeated-layer": Flag(S),
    "--activation-func-clamp-value": Flag(F),
}


# Flags of older Megatron-LM releases (2021-22) and of Megatron-DeepSpeed that today's parser does not have
# (--checkpoint-activations it keeps, only to exit), rewritten into today's by workloads/inputs/megatron_legacy.py.
LEGACY_FLAGS: dict[str, Flag] = {
    "--checkpoint-activations": Flag(S),
    "--checkpoint-num-layers": Flag(I),
    "--activations-checkpoint-method": Flag(T, ("uniform", "block")),
    "--activations-checkpoint-num-layers": Flag(I),
    "--DDP-impl": Flag(T, ("local", "torch")),
    # FlashAttention in those scripts (Megatron-LM's legacy model; Megatron-DeepSpeed's -v2 and -triton); no effect on
    # Megatron-Core's layers, whose --attention-backend chooses
    "--use-flash-attn": Flag(S),
    "--use-flash-attn-v2": Flag(S),
    "--use-flash-attn-triton": Flag(S),
    # Megatron-DeepSpeed's
    "--deepspeed": Flag(S),
    "--zero-stage": Flag(I),
    "--pad-vocab-size-to": Flag(I),
    "--pp-partition-method": Flag(T),
    # today's Megatron-LM still parses it, unused: its p2p communication no longer splits sends
    "--no-scatter-gather-tensors-in-pipeline": Flag(S),
}
READ_FLAGS = {**FLAGS, **LEGACY_FLAGS}


class IgnoredArg(NamedTuple):
    """A flag the step does not depend on (or moesim does not model), with the reason."""

    flag: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"flag": self.flag, "reason": self.reason}


class Arguments(NamedTuple):
    """The flags of one command line: the values of those moesim reads, and the others with their reason."""

    values: dict[str, Any]
    ignored: tuple[IgnoredArg, ...]


def read_text(text_or_path: str | Path) -> str:
    """The argument text: the contents of the file ``text_or_path`` names, or the text itself when it is a command
    line (it starts with ``--`` or holds a space: a pasted ``torchrun ... pretrain_gpt.py ...`` line)."""
    if isinstance(text_or_path, str):
        text = text_or_path.strip()
        inline = text.startswith("--") or any(char.isspace() for char in text)
        try:
            named = "\n" not in text and Path(text).is_file()
        except (OSError, ValueError):  # a name too long for a file: a pasted command line
            named = False
        if inline and not named:
            check_limit(SOURCE, "args_bytes", len(text_or_path.encode("utf-8", "replace")), "arguments: size in bytes")
            return text_or_path
    try:
        return read_bounded(SOURCE, text_or_path, "args_bytes")  # a regular file within its size limit
    except ConfigError as error:
        raise ConfigError(SOURCE, f"not flags (they start with --) nor a readable file: {error.rule}") from None


def tokens(text: str) -> list[str]:
    """Shell words of the training command in ``text`` (workloads/inputs/shell_script.py): continuation lines,
    comments, quotes, variables and bash arrays as bash reads them; a ``torchrun ... pretrain_gpt.py --flags``
    line keeps what follows the script."""
    return command_words(text).words


def parse_arguments(words: list[str]) -> Arguments:
    """Group the words into flags and their values; type the flags moesim reads (argparse keeps the last
    of a repeated flag, and so does this); list the others as ignored."""
    groups: list[tuple[str, list[str]]] = []
    for word in words:
        if word.startswith("--"):
            name, sep, value = word.partition("=")
            if name == "--":
                raise ConfigError(SOURCE, "a bare '--' is not a Megatron flag")
            groups.append((name, [value] if sep else []))
        elif groups:
            groups[-1][1].append(word)
        else:
            raise ConfigError(SOURCE, f"{word!r} comes before the first --flag")
    values: dict[str, Any] = {}
    ignored: dict[str, IgnoredArg] = {}
    for name, raw in groups:
        if name in READ_FLAGS:
            values[name] = typed(name, READ_FLAGS[name], raw)
        else:
            ignored[name] = IgnoredArg(name, ignored_reason(name))
    return Arguments(values, tuple(ignored.values()))


def positive(args: dict[str, Any], flag: str, default: int | None) -> Any:
    """The value of ``flag`` (or ``default``), which must be >= 1 when given."""
    value = args.get(flag, default)
    if value is not None and value < 1:
        raise ConfigError(flag, f"must be a positive integer, got {value}")
    return value


def flag_class(name: str) -> str:
    """A flag's class: "modelled" (moesim reads its value), else its reason's (megatron_flag_list.reason_class)."""
    return "modelled" if name in READ_FLAGS else reason_class(ignored_reason(name))


def typed(name: str, flag: Flag, raw: list[str]) -> Any:
    """The value of one flag as its kind; a wrong count, type or choice is a ConfigError naming it."""
    if flag.kind == Kind.SWITCH:
        if raw:
            raise ConfigError(name, f"takes no value, got {' '.join(raw)!r}")
        return True
    if flag.kind == Kind.TEXTS:
        if not raw:
            raise ConfigError(name, "needs at least one value")
        for item in raw:
            _check_choice(name, flag, item)
        return tuple(raw)
    if len(raw) != 1:
        raise ConfigError(name, f"takes one value, got {len(raw)}: {' '.join(raw)!r}")
    text = raw[0]
    if flag.kind == Kind.INT:
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(name, f"must be an integer, got {text!r}{_unset(text)}") from None
        if abs(value) > INT_MAX:
            raise ConfigError(name, f"{text} is beyond the 32-bit integers Megatron's sizes are")
        return value
    if flag.kind == Kind.FLOAT:
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(name, f"must be a number, got {text!r}{_unset(text)}") from None
        if not math.isfinite(value):
            raise ConfigError(name, f"must be a finite number, got {text!r}")
        return value
    _check_choice(name, flag, text)
    return text


def _unset(text: str) -> str:
    """A hint where a value is a shell variable the script left unset (workloads/inputs/shell_script.py)."""
    return ": a shell variable the script does not set; set it in the script or write the value" if "$" in text else ""


def _check_choice(name: str, flag: Flag, text: str) -> None:
    if flag.choices and text not in flag.choices:
        raise ConfigError(name, f"must be one of {', '.join(flag.choices)}, got {text!r}")


FIELD_FLAGS = {  # a validation error's field -> the Megatron flags that set it
    "layout.intra_size": "--tensor-model-parallel-size",
    "layout.pp": "--pipeline-model-parallel-size",
    "layout.cp": "--context-parallel-size",
    "layout.ep": "--expert-model-parallel-size x --expert-tensor-parallel-size",
    "layout.etp": "--expert-tensor-parallel-size, default --tensor-model-parallel-size",
    "layout.virtual_stages": "--num-virtual-stages-per-pipeline-rank",
    "layout.microbatch_group": "--microbatch-group-size-per-virtual-pipeline-stage",
    "layout.block_layers": "--pipeline-model-parallel-layout / --decoder-first/last-pipeline-num-layers",
    "layout.ep_max_nodes": "--moe-router-group-topk",
    "layout.recompute_modules": "--recompute-modules",
    "layout.host_sync_per_moe_layer": "--cuda-graph-impl full_iteration needs static MoE shapes",
    "layout.micro_batch": "--micro-batch-size",
    "layout.dispatcher_sms": "--moe-flex-dispatcher-num-sms (or --moe-deepep-num-sms / --moe-hybridep-num-sms)",
    "layout.router_quant_padding": "--moe-router-padding-for-quantization (or --moe-router-padding-for-fp8)",
    "layout.zero_stage": "--use-megatron-fsdp --data-parallel-sharding-strategy, --use-torch-fsdp2",
    "layout.dp_instances": "--num-distributed-optimizer-instances",
    "layout.grad_accumulation_fusion": "--no-gradient-accumulation-fusion",
    "layout.outer_dp_sharding": "--outer-dp-sharding-strategy",
    "layout.offload_layers": "--cpu-offloading-num-layers",
    "layout.offload_modules": "--fine-grained-activation-offloading --offload-modules",
    "layout.offload_min_elements": "--min-offloaded-tensor-size",
    "layout.optimizer": "--optimizer",
    "layout.muon_ns_steps": "--muon-num-ns-steps",
    "layout.bf16_first_layers": "--num-layers-at-start-in-bf16",
    "layout.bf16_last_layers": "--num-layers-at-end-in-bf16",
    "layout.module_precisions": "--te-precision-config-file",
    "global_batch": "--global-batch-size",
    "seq_len": "--seq-length",
    "gpus": "--tensor/pipeline/context-parallel-size",
    "model.num_heads": "--num-attention-heads",
    "model.num_kv_heads": "--num-query-groups",
    "model.num_experts": "--num-experts",
    "model.expert_ffn_size": "--moe-ffn-hidden-size",
    "model.hidden_dropout": "--hidden-dropout",
    "model.attention_dropout": "--attention-dropout",
}
