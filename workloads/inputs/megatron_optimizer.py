"""``--optimizer``: Adam, or Muon for the 2-D weights (workloads/specs/muon.py), in Megatron-LM's own words
(megatron/training/arguments.py validate_args, "emerging optimizer check", at NVIDIA/Megatron-LM d98e8a64dd).

``dist_muon`` (deprecated there: "Use --optimizer muon --use-distributed-optimizer instead") and ``muon`` with
``--use-distributed-optimizer`` run the layer-wise distributed optimizer (ZeRO-1's traffic and state sharding);
``muon`` alone keeps every state on every rank and all-reduces the gradients. The other emerging optimizers
(``lion``, ``soap``, ``adaptive_muon``) and ``sgd`` are refused.
"""

from __future__ import annotations

from typing import Any

from topologies.errors import ConfigError
from workloads.specs.muon import MUON_NS_STEPS

OPTIMIZER_CHOICES = ("adam", "sgd", "muon", "dist_muon", "lion", "soap", "adaptive_muon")  # arguments.py at d98e8a64dd


def optimizer_fields(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The layout's optimizer fields from ``--optimizer`` and ``--muon-*``."""
    name = args.get("--optimizer", "adam")
    if name == "adam":
        return {"optimizer": "adam"}
    if name not in ("muon", "dist_muon"):
        raise ConfigError("--optimizer", f"{name!r} not modelled: moesim simulates adam and muon (dist_muon)")
    for flag in ("--use-megatron-fsdp", "--use-torch-fsdp2"):
        if args.get(flag):
            raise ConfigError(flag, f"Emerging optimizer does not support {flag[6:]} for now (Megatron-LM)")
    if args.get("--fp16"):
        raise ConfigError("--fp16", "emerging optimizer with fp16 is not supported (Megatron-Core)")
    if args.get("--muon-fp32-matmul-prec", "medium") != "medium":
        notes.append("--muon-fp32-matmul-prec: the Newton-Schulz GEMMs timed in BF16, as at medium")
    return {
        "optimizer": "muon",
        "muon_ns_steps": args.get("--muon-num-ns-steps", MUON_NS_STEPS),
        "muon_tp_mode": args.get("--muon-tp-mode", "duplicated"),
    }


def sharded_optimizer(args: dict[str, Any]) -> bool:
    """Whether the optimizer's states are sharded over data parallelism: the distributed optimizer, or Muon's
    layer-wise one (``dist_muon``, or ``muon`` with ``--use-distributed-optimizer``)."""
    return bool(args.get("--use-distributed-optimizer")) or args.get("--optimizer") == "dist_muon"
