"""Megatron FSDP (--use-megatron-fsdp) and PyTorch FSDP2 (--use-torch-fsdp2) as the sharding they give a job; with
them the job's other memory options: hierarchical DP and activation offloading.

Memory is modelled: --data-parallel-sharding-strategy no_shard / optim / optim_grads / optim_grads_params shards
nothing / the optimizer state / and the gradients / and the weights over data parallelism, ZeRO-0 to ZeRO-3
(docs/user-guide/features/megatron_fsdp.md at NVIDIA/Megatron-LM d98e8a64dd, "Sharded memory profiles for ZeRO-1
(optimizer state), ZeRO-2 (optimizer state and gradients), and ZeRO-3"; arguments.py default optim_grads_params),
with the two units its double buffer holds (simulator.memory.per_gpu.sharded_unit_bytes). FSDP2 shards all three.
Communication is timed per unit (workloads/graph/fsdp.py): ZeRO-3 all-gathers each transformer layer's weights
before its forward and again before its backward, every micro-batch, ZeRO-2 and up reduce-scatter its gradients
after its backward, on streams of their own, prefetched two units deep (megatron/core/distributed/fsdp/
mcore_fsdp_adapter.py: "'optim_grads': Additionally, RS communication groups on all microbatches.
'optim_grads_params': RS & AG communication groups on all microbatches"). FSDP2 all-gathers BF16 weights whatever
--fp8-param-gather says: Megatron-LM turns it off ("FSDP2 FP8 param gather is not supported yet in TE 2.0, will
fallback to bf16", megatron/training/arguments.py validate_args at d98e8a64dd).
"""

from __future__ import annotations

from typing import Any

from topologies.errors import ConfigError
from workloads.inputs.megatron_precision import sharded_optimizer

STRATEGY_ZERO = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
# Megatron-LM's refusals above are its own: PyTorch-native stacks (NeMo AutoModel, torchtitan) run FSDP2 with EP and PP,
# and the sharding they give is Megatron FSDP's optim_grads_params, which moesim times the same way (BF16 gathers).
OTHER_STACKS = (
    " (Megatron-LM's rule; for a PyTorch-native FSDP2 job with it, as NeMo AutoModel or torchtitan run, give "
    "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params instead)"
)


def fsdp_zero_stage(args: dict[str, Any], notes: list[str]) -> int | None:
    """The ZeRO stage an FSDP job's memory follows, or None without FSDP; Megatron's rules in its words."""
    megatron, torch = bool(args.get("--use-megatron-fsdp")), bool(args.get("--use-torch-fsdp2"))
    strategy = args.get("--data-parallel-sharding-strategy")
    if not (megatron or torch):
        if strategy is not None:
            notes.append("--data-parallel-sharding-strategy without --use-megatron-fsdp: no effect")
        return None
    if megatron and torch:
        raise ConfigError("--use-torch-fsdp2", "use one of --use-megatron-fsdp and --use-torch-fsdp2")
    if torch:  # megatron/training/arguments.py validate_args at d98e8a64dd
        rules = (
            (
                args.get("--pipeline-model-parallel-size", 1) == 1,
                "--use-torch-fsdp2 is not supported with pipeline parallelism" + OTHER_STACKS,
            ),
            (
                args.get("--expert-model-parallel-size", 1) == 1,
                "--use-torch-fsdp2 is not supported with expert parallelism" + OTHER_STACKS,
            ),
            (
                not args.get("--use-distributed-optimizer"),
                "--use-torch-fsdp2 is not supported with MCore's distributed optimizer",
            ),
            (
                bool(args.get("--no-gradient-accumulation-fusion")),
                "--use-torch-fsdp2 is not supported with gradient accumulation fusion",
            ),
            (
                bool(args.get("--untie-embeddings-and-output-weights")),
                "--use-torch-fsdp2 requires --untie-embeddings-and-output-weights",
            ),
            (not args.get("--fp16"), "--use-torch-fsdp2 not supported with fp16 yet"),
        )
        for ok, rule in rules:
            if not ok:
                raise ConfigError("--use-torch-fsdp2", rule)
        if strategy is not None:
            notes.append(
                "--data-parallel-sharding-strategy is Megatron FSDP's: FSDP2 shards weights, gradients and optimizer"
            )
        zero, name = 3, "PyTorch FSDP2"
    else:
        strategy = strategy or "optim_grads_params"
        zero, name = STRATEGY_ZERO[strategy], f"Megatron FSDP ({strategy})"
    timed = {
        0: "gradients all-reduced once per step",
        1: "gradients reduce-scattered and weights all-gathered once per step",
        2: "each layer's gradients reduce-scattered after its backward, every micro-batch; weights all-gathered once "
        "per step",
        3: "each layer's weights all-gathered before its forward and its backward and its gradients reduce-scattered "
        "after its backward, every micro-batch",
    }[zero]
    notes.append(f"{name}: memory sharded as ZeRO-{zero}; timed: {timed}")
    return zero


def megatron_fsdp_grads_dtype(args: dict[str, Any], notes: list[str]) -> str:
    """The main gradients' dtype under Megatron FSDP: --megatron-fsdp-main-grads-dtype, whose default "auto" is the
    weights' dtype (BF16 under --bf16, and for FP8 weights; megatron_fsdp/param_and_grad_buffer.py
    _resolve_group_grad_dtype and mixed_precision.py MixedPrecisionPolicy.main_grads_dtype at d98e8a64dd: "If set
    to None, main gradients will match the dtype of the model compute parameters"). FP16 counts as BF16 (2 bytes)."""
    chosen = args.get("--megatron-fsdp-main-grads-dtype", "auto")
    if chosen == "auto":
        chosen = "bf16" if args.get("--bf16") or args.get("--fp16") else "fp32"
        notes.append(f"Megatron FSDP: main gradients in {chosen} (--megatron-fsdp-main-grads-dtype auto: the weights')")
    return "bf16" if chosen == "fp16" else chosen


def fsdp_fp8_param_gather(args: dict[str, Any], notes: list[str]) -> None:
    """--fp8-param-gather's rule in Megatron-LM's words (megatron/training/arguments.py validate_args at d98e8a64dd):
    with the distributed optimizer, torch FSDP2 or Megatron FSDP; FSDP2 then turns it off ("FSDP2 FP8 param gather
    is not supported yet in TE 2.0, will fallback to bf16"), which the caller's fp8_param_gather follows."""
    sharded = ("--use-distributed-optimizer", "--use-megatron-fsdp", "--use-torch-fsdp2")
    if not any(args.get(flag) for flag in sharded):
        raise ConfigError("--fp8-param-gather", "only supported with distributed optimizer, torch fsdp2, megatron fsdp")
    if args.get("--use-torch-fsdp2"):
        notes.append("--use-torch-fsdp2: Megatron-LM turns --fp8-param-gather off (FSDP2 gathers BF16 weights)")


def hybrid_dp_fields(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """--num-distributed-optimizer-instances and --outer-dp-sharding-strategy as layout fields (workloads/specs/
    hybrid_dp.py, which holds Megatron's rules between them); the outer strategy means something only with Megatron
    FSDP across more than one instance ("This option is only effective when Hybrid FSDP is enabled",
    megatron/training/arguments.py at d98e8a64dd)."""
    instances = args.get("--num-distributed-optimizer-instances", 1)
    outer = args.get("--outer-dp-sharding-strategy", "no_shard")
    if outer != "no_shard" and not (args.get("--use-megatron-fsdp") and instances > 1):
        notes.append("--outer-dp-sharding-strategy without Megatron FSDP across instances: no effect")
        outer = "no_shard"
    return {"dp_instances": instances, "outer_dp_sharding": outer}


def data_parallel_fields(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The distributed optimizer (ZeRO-1: 6 + 12/d bytes per parameter), FSDP's sharding, DP communication overlap."""
    fsdp = fsdp_zero_stage(args, notes)
    distributed = sharded_optimizer(args) or bool(args.get("--use-megatron-fsdp"))
    grads, params = bool(args.get("--overlap-grad-reduce")), bool(args.get("--overlap-param-gather"))
    if params and not distributed:
        raise ConfigError(
            "--overlap-param-gather", "only supported with distributed optimizer, megatron fsdp, or dist_muon"
        )
    if params and not grads:
        raise ConfigError("--overlap-param-gather", "needs --overlap-grad-reduce")
    if distributed and grads and not params:
        notes.append("--overlap-grad-reduce without --overlap-param-gather: moesim overlaps both (one dp_overlap)")
    zero = fsdp if fsdp is not None else int(distributed)
    fused = not args.get("--no-gradient-accumulation-fusion")  # workloads/graph/main_grad.py
    fields = {"zero_stage": zero, "grad_sync": "fp32-rs", "dp_overlap": grads, "grad_accumulation_fusion": fused}
    return {**fields, **hybrid_dp_fields(args, notes)}


def offload_fields(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """Activation offloading as layout fields (workloads/specs/memory_options.py, which holds Megatron's rules):
    --cpu-offloading-num-layers N > 0 turns --cpu-offloading on (megatron/training/arguments.py validate_args at
    d98e8a64dd); --offload-modules count only under --fine-grained-activation-offloading."""
    layers = args.get("--cpu-offloading-num-layers", 0)
    fine = bool(args.get("--fine-grained-activation-offloading"))
    modules = tuple(args.get("--offload-modules", ())) if fine else ()
    if args.get("--offload-modules") and not fine:
        notes.append("--offload-modules without --fine-grained-activation-offloading: no effect")
    if fine and not modules:  # TransformerConfig.__post_init__: "assert self.offload_modules is not None and ..."
        raise ConfigError("--offload-modules", "--fine-grained-activation-offloading needs --offload-modules")
    if layers or modules:
        notes.append("activation offloading: its memory is modelled, its host copies are not timed")
    return {
        "offload_layers": layers,
        "offload_modules": modules,
        "offload_min_elements": args.get("--min-offloaded-tensor-size", 1_048_576),
    }
