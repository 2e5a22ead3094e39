"""Megatron-LM's CUDA graphs as a moesim layout (``cuda_graphs``), and the flex dispatcher's static settings: the
MoE shapes a graph needs (``rank_capacity``) and the SMs its kernels hold (``flex_dispatcher_sms``). Flags,
Megatron's rules between them in Megatron's words, and the scopes moesim captures (workloads/specs/cuda_graphs.py).
Source: NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553.
"""

from __future__ import annotations

from typing import Any

from topologies.errors import ConfigError
from workloads.specs.cuda_graphs import GRAPH_SCOPES, ITERATION

MODULE_SCOPES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba", "full")  # --cuda-graph-modules


def granularity(args: dict[str, Any]) -> str | None:
    """--recompute-activations overrides --recompute-granularity with selective (Megatron-LM
    megatron/training/arguments.py validate_args: ``if args.recompute_activations: args.recompute_granularity =
    'selective'``)."""
    return "selective" if args.get("--recompute-activations") else args.get("--recompute-granularity")


# Megatron scope names -> moesim's (workloads/specs/cuda_graphs.py): "full" (deprecated) is the whole layer.
_GRAPH_SCOPES = {"full": "layer"}


def cuda_graphs(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The CUDA-graph scopes of --cuda-graph-impl (or the legacy switches); none without a graph implementation.

    As megatron/training/arguments.py validate_args and megatron/core/transformer/cuda_graph_config.py read them
    at d98e8a64dd: --cuda-graph-scope is the deprecated spelling of --cuda-graph-modules; its value full_iteration
    migrates to --cuda-graph-impl full_iteration (allowed from none, local or full_iteration), whose step graph
    ("iteration") takes no modules and needs the NaN check off; full_iteration_inference concerns inference only.
    """
    impl = args.get("--cuda-graph-impl", "none")
    if args.get("--enable-cuda-graph") or args.get("--external-cuda-graph"):
        impl = "local" if args.get("--enable-cuda-graph") else "transformer_engine"
    if args.get("--cuda-graph-scope") and args.get("--cuda-graph-modules"):
        raise ConfigError("--cuda-graph-scope", "--cuda-graph-scope and --cuda-graph-modules cannot be used together.")
    scopes = list(args.get("--cuda-graph-modules") or args.get("--cuda-graph-scope") or [])
    given = "--cuda-graph-scope" if args.get("--cuda-graph-scope") else "--cuda-graph-modules"  # the user's spelling
    if "full_iteration" in scopes:
        if impl not in ("none", "local", "full_iteration"):
            raise ConfigError(
                given, f"cuda_graph_modules='full_iteration' cannot be combined with cuda_graph_impl={impl!r}."
            )
        impl = "full_iteration"
        scopes.remove("full_iteration")
    if "full_iteration_inference" in scopes:
        scopes.remove("full_iteration_inference")
        notes.append(f"{given} full_iteration_inference: inference graphs, no effect on training")
    if impl == "none":
        if scopes:
            notes.append(f"{given} without --cuda-graph-impl: no CUDA graphs (Megatron ignores it)")
        return {"cuda_graph_scope": ()}
    if granularity(args) == "full" and impl != "full_iteration":  # TransformerConfig.__post_init__
        raise ConfigError("--recompute-granularity", "full recompute is only supported with full iteration CUDA graph.")
    if impl == "full_iteration":
        if scopes:
            raise ConfigError(given, f"{given} must be empty when --cuda-graph-impl=full_iteration.")
        # validate_args turns the check off itself under --fp16 with dynamic loss scaling (no --loss-scale)
        checked = not args.get("--no-check-for-nan-in-loss-and-grad")
        if checked and not (args.get("--fp16") and not args.get("--loss-scale")):
            raise ConfigError(
                "--no-check-for-nan-in-loss-and-grad",
                "--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration for training.",
            )
        return {"cuda_graph_scope": (ITERATION,)}
    kept = tuple(dict.fromkeys(_GRAPH_SCOPES.get(s, s) for s in scopes)) or ("layer",)
    for scope in kept:
        if scope not in GRAPH_SCOPES or scope == ITERATION:
            raise ConfigError(given, f"{scope!r} is not one of {', '.join(MODULE_SCOPES)}")
    return {"cuda_graph_scope": kept}


def rank_capacity(args: dict[str, Any], dispatcher: str, backend: str, notes: list[str]) -> dict[str, Any]:
    """The flex dispatcher's static per-rank token budget (--moe-expert-rank-capacity-factor) as layout fields: a
    receive buffer of local tokens x top-k x the factor, no device-to-host sync, the grouped GEMM on the tokens
    received (device-side counts), the routed activations kept budget-sized unless the paged stash
    (--moe-paged-stash) copies them into pages sized by the average. Megatron's rules and words:
    TransformerConfig.__post_init__ and token_dispatcher.py _HybridEPManager / _NCCLEPManager at d98e8a64dd.
    Empty without a budget."""
    if args.get("--moe-paged-stash") and args.get("--moe-expert-rank-capacity-factor") is None:
        raise ConfigError(
            "--moe-paged-stash",
            "moe_paged_stash requires moe_expert_rank_capacity_factor to be set; "
            "there is no need to use paged stashing without it.",
        )
    factor = args.get("--moe-expert-rank-capacity-factor")
    fuser, grouped = bool(args.get("--use-transformer-engine-op-fuser")), bool(args.get("--moe-grouped-gemm"))
    if args.get("--moe-use-grouped-tensor") and not grouped:
        raise ConfigError("--moe-use-grouped-tensor", "moe_use_grouped_tensor=True requires moe_grouped_gemm=True.")
    if factor is None:
        return {}
    if backend not in ("hybridep", "ncclep"):
        raise ConfigError(
            "--moe-expert-rank-capacity-factor",
            "moe_expert_rank_capacity_factor requires moe_flex_dispatcher_backend to be 'hybridep' or 'ncclep'.",
        )
    if backend == "hybridep" and not (fuser or args.get("--moe-use-grouped-tensor")):
        raise ConfigError(
            "--moe-expert-rank-capacity-factor",
            "moe_expert_rank_capacity_factor with the 'hybridep' backend requires "
            "use_transformer_engine_op_fuser=True or moe_use_grouped_tensor=True.",
        )
    if backend == "ncclep" and not (fuser and grouped):
        raise ConfigError(
            "--moe-expert-rank-capacity-factor",
            "moe_expert_rank_capacity_factor with the 'ncclep' backend requires BOTH "
            "use_transformer_engine_op_fuser and moe_grouped_gemm",
        )
    if factor <= 0:
        raise ConfigError("--moe-expert-rank-capacity-factor", f"must be > 0, got {factor}")
    if dispatcher != "flex":
        notes.append("--moe-expert-rank-capacity-factor without --moe-token-dispatcher-type flex: no effect")
        return {}
    notes.append(
        f"--moe-expert-rank-capacity-factor {factor}: static per-rank buffers, no host sync; the tokens {backend} "
        "would drop above the budget are not modelled (balanced routing stays within it)"
    )
    stash = 0.0
    if args.get("--moe-paged-stash"):
        # TransformerConfig moe_paged_stash_buffer_size_factor_cuda (default 1.10): > 0 sizes the pages by the
        # average token count, < 0 by the actual maximum (the static budget here)
        stash = args.get("--moe-paged-stash-buffer-size-factor-cuda", 1.10)
        stash = stash if stash > 0 else factor
        notes.append("--moe-paged-stash: its stash and reload copy kernels (pack / unpack streams) are not timed")
    return {"expert_rank_capacity": factor, "paged_stash_factor": stash}


_DEPRECATED_SMS = ("--moe-deepep-num-sms", "--moe-hybridep-num-sms")


def flex_dispatcher_sms(args: dict[str, Any], dispatcher: str, backend: str, notes: list[str]) -> int:
    """The SMs of the flex dispatcher's dispatch and combine kernels (layout.dispatcher_sms; 0: the backend's own
    default, simulator/costs/calibration.py). TransformerConfig.__post_init__ at d98e8a64dd: an explicit
    --moe-flex-dispatcher-num-sms wins; else the deprecated --moe-deepep-num-sms / --moe-hybridep-num-sms is routed
    into it, and the two must agree. token_dispatcher.py then hands the value to DeepEP (Buffer.set_num_sms, which
    asserts an even count: deepseek-ai/DeepEP deep_ep/buffer.py) or HybridEP (num_sms_dispatch_api and
    num_sms_combine_api alike)."""
    flex = args.get("--moe-flex-dispatcher-num-sms")
    given = {name: args[name] for name in _DEPRECATED_SMS if args.get(name) is not None}
    if flex is None and len(set(given.values())) > 1:
        knobs = {name[2:].replace("-", "_"): value for name, value in given.items()}
        raise ConfigError(
            _DEPRECATED_SMS[1],
            f"Conflicting deprecated SM-count knobs {knobs}; set a single moe_flex_dispatcher_num_sms instead.",
        )
    flag = "--moe-flex-dispatcher-num-sms" if flex is not None else next(iter(given), "")
    sms = flex if flex is not None else next(iter(given.values()), None)
    if sms is None:
        return 0
    if sms < 1:
        raise ConfigError(flag, f"must be a positive integer, got {sms}")
    if dispatcher != "flex":
        notes.append(f"{flag} without --moe-token-dispatcher-type flex: no effect")
        return 0
    if backend == "deepep" and sms % 2:
        raise ConfigError(flag, f"The SM count must be even (DeepEP's Buffer.set_num_sms), got {sms}")
    return sms


def router_padding(args: dict[str, Any], notes: list[str]) -> bool:
    """--moe-router-padding-for-quantization, or its deprecated alias --moe-router-padding-for-fp8, which
    TransformerConfig.__post_init__ routes into it (layout.router_quant_padding checks the rest: an FP8 / FP4
    recipe, a dispatcher that pads)."""
    if args.get("--moe-router-padding-for-fp8"):
        notes.append("--moe-router-padding-for-fp8 is deprecated: read as --moe-router-padding-for-quantization")
    return bool(args.get("--moe-router-padding-for-quantization") or args.get("--moe-router-padding-for-fp8"))
