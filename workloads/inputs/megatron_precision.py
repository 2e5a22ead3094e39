"""Megatron-LM's optimizer and mixed-precision choices beyond the GEMM recipe, in its own words (NVIDIA/Megatron-LM
d98e8a64dd): ``--optimizer``, ``--first-last-layers-bf16`` and ``--te-precision-config-file``.

``--optimizer``: Adam, or Muon for the 2-D weights (workloads/specs/muon.py; megatron/training/arguments.py
validate_args, "emerging optimizer check"). ``dist_muon`` (deprecated there: "Use --optimizer muon
--use-distributed-optimizer instead") and ``muon`` with ``--use-distributed-optimizer`` run the layer-wise distributed
optimizer (ZeRO-1's traffic and state sharding); ``muon`` alone keeps every state on every rank and all-reduces the
gradients. ``adaptive_muon`` adds AdaMuon's elementwise second moment (OptimizerConfig's adaptive_muon_moment2_method
default, "adamuon"; no flag sets it). The other
emerging optimizers (``lion``, ``soap``) and ``sgd`` are refused.

``--first-last-layers-bf16``: the first and last layers of an FP8 / FP4 run in BF16
(megatron/core/transformer/transformer_config.py first_last_layers_bf16, num_layers_at_start_in_bf16 and
num_layers_at_end_in_bf16, 1 each by default; megatron/core/fp8_utils.py and fp4_utils.py: a null quantization
context for those global layer indices).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from topologies.errors import ConfigError
from workloads.specs.muon import MUON_NS_STEPS

OPTIMIZER_CHOICES = ("adam", "sgd", "muon", "dist_muon", "lion", "soap", "adaptive_muon")  # arguments.py at d98e8a64dd


def optimizer_fields(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The layout's optimizer fields from ``--optimizer`` and ``--muon-*``."""
    name = args.get("--optimizer", "adam")
    if name == "adam":
        return {"optimizer": "adam"}
    if name not in ("muon", "dist_muon", "adaptive_muon"):
        raise ConfigError(
            "--optimizer", f"{name!r} not modelled: moesim simulates adam, muon (dist_muon), adaptive_muon"
        )
    for flag in ("--use-megatron-fsdp", "--use-torch-fsdp2"):
        if args.get(flag):
            raise ConfigError(flag, f"Emerging optimizer does not support {flag[6:]} for now (Megatron-LM)")
    if args.get("--fp16"):
        raise ConfigError("--fp16", "emerging optimizer with fp16 is not supported (Megatron-Core)")
    if args.get("--muon-fp32-matmul-prec", "medium") != "medium":
        notes.append("--muon-fp32-matmul-prec: the Newton-Schulz GEMMs timed in BF16, as at medium")
    return {
        "optimizer": "adaptive_muon" if name == "adaptive_muon" else "muon",
        "muon_ns_steps": args.get("--muon-num-ns-steps", MUON_NS_STEPS),
        "muon_tp_mode": args.get("--muon-tp-mode", "duplicated"),
    }


def sharded_optimizer(args: dict[str, Any]) -> bool:
    """Whether the optimizer's states are sharded over data parallelism: the distributed optimizer, or Muon's
    layer-wise one (``dist_muon``, or ``muon`` with ``--use-distributed-optimizer``)."""
    return bool(args.get("--use-distributed-optimizer")) or args.get("--optimizer") == "dist_muon"


def bf16_layer_fields(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The layout's BF16 layer counts (workloads/graph/step.py layer_kind), or none."""
    if not args.get("--first-last-layers-bf16"):
        return {}
    fp8, fp4 = args.get("--fp8-format"), args.get("--fp4-format")
    if not (fp8 or fp4):
        notes.append("--first-last-layers-bf16 without --fp8-format or --fp4-format: every layer is BF16 already")
        return {}
    if fp8 and args.get("--fp8-recipe", "delayed") == "delayed":
        raise ConfigError("--first-last-layers-bf16", "Delayed scaling does not support first / last layer in BF16.")
    return {
        "bf16_first_layers": args.get("--num-layers-at-start-in-bf16", 1),
        "bf16_last_layers": args.get("--num-layers-at-end-in-bf16", 1),
    }


def module_precision_fields(args: dict[str, Any], text_or_path: str | Path) -> dict[str, Any]:
    """``--te-precision-config-file``'s ordered matchers as the layout's "pattern=recipe" rules
    (workloads/specs/module_precision.py): each enabled glob matcher's pattern with its config's training recipe
    (``fp8_quantization_recipe`` or ``fp4_quantization_recipe``; none: BF16). A relative path is read beside the flag
    file, else from the working directory."""
    name = args.get("--te-precision-config-file")
    if not name:
        return {}
    path = Path(name)
    try:  # flags read from a file: a relative name is read beside it
        flags_file = Path(str(text_or_path).strip())
        if not path.is_absolute() and flags_file.is_file() and (flags_file.parent / path).is_file():
            path = flags_file.parent / path
    except (OSError, ValueError):  # inline flags (a name too long for a file)
        pass
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError("--te-precision-config-file", f"cannot read {name}: {error}") from error
    recipes = {}
    for key, entry in (config.get("configs") or {}).items():
        training = entry.get("training_recipe") or {}
        recipes[key] = training.get("fp8_quantization_recipe") or training.get("fp4_quantization_recipe") or "bf16"
    rules = []
    for key, matcher in (config.get("matchers") or {}).items():
        if not matcher.get("enabled", True):
            continue
        if matcher.get("type", "glob") != "glob" or matcher.get("config") not in recipes:
            raise ConfigError("--te-precision-config-file", f"matcher {key!r}: glob matchers of a listed config only")
        rules.append(f"{matcher['pattern']}={recipes[matcher['config']]}")
    return {"module_precisions": tuple(rules)}


def ddp_grads_dtype(args: dict[str, Any], requested: str) -> str:
    """The dtype of DDP's gradient buffers (the main grads, which the DP reduce moves): BF16 under
    --grad-reduce-in-bf16; in an --fp16 job FP16 unless --accumulate-allreduce-grads-in-fp32 (validate_args forces
    FP32 accumulation for --bf16 only, and DistributedDataParallelConfig.grad_reduce_in_fp32 is that flag: arguments.py,
    training.py at d98e8a64dd); else ``requested`` (--main-grads-dtype, FP32 by default)."""
    if args.get("--grad-reduce-in-bf16"):
        return "bf16"
    fp32 = args.get("--accumulate-allreduce-grads-in-fp32") or "--main-grads-dtype" in args
    return "fp16" if args.get("--fp16") and not fp32 else requested
