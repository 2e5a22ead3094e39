"""Hierarchical data parallelism: Megatron's --num-distributed-optimizer-instances N (layout ``dp_instances``).

The DP x CP group of every weight splits into N instances of consecutive ranks (megatron/core/parallel_state.py at
NVIDIA/Megatron-LM d98e8a64dd: the "intra partial" data-parallel groups, ``ranks_with_cp[i * size : (i + 1) *
size]``; expert weights alike over expert DP). Inside an instance everything runs as with one DP group of DP / N
GPUs; across the instances the gradients are reduced once a step:

- the distributed optimizer (ZeRO-1, "partial DistOpt"): each bucket's gradients are reduce-scattered inside the
  instance, then the shard all-reduced across the instances ("NCCL Stream: RS ... AR",
  megatron/core/distributed/param_and_grad_buffer.py start_grad_sync); the optimizer state is sharded over the
  instance, the weights all-gathered inside it;
- Megatron FSDP (docs/user-guide/features/megatron_fsdp.md, "Data-Parallel Sharding Strategies"): the FSDP units'
  weights, gradients and optimizer state sharded over the instance ("inner" DP), and across the instances
  (``outer_dp_sharding``, --outer-dp-sharding-strategy) either replicated, "no_shard" (HSDP: "outer data-parallel
  gradients are all-reduced during the last backward pass before the optimization step"), or "optim" (Hybrid-FSDP:
  the optimizer state sharded across them too; "Outer data-parallel gradients are reduce-scattered ... during the
  last backward pass", "Outer data-parallel parameters are all-gathered during the first forward pass after the
  optimization step"; it "Requires --data-parallel-sharding-strategy optim_grads_params").

moesim times the step's cross-instance reduction per bucket after its reduce-scatter in the instance (and Hybrid-FSDP's
gather of the weight shards before the instance's), over the ring of the instances' same-position GPUs
(simulator/engine/engine.py); what a GPU holds follows the shards here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

from topologies.errors import ConfigError
from workloads.specs.muon import orthogonalized

OUTER_DP_SHARDINGS = ("no_shard", "optim")


class HybridLayout(Protocol):
    """The layout fields this module reads (workloads.specs.layouts.LayoutSpec)."""

    dp_instances: int
    outer_dp_sharding: str
    zero_stage: int
    optimizer: str
    intra_size: int
    cp: int
    pp: int
    ep: int
    etp: int
    ffn: str


def check_layout(layout: HybridLayout) -> None:
    """Megatron's rules between the fields, in its words where it has them."""
    if layout.outer_dp_sharding not in OUTER_DP_SHARDINGS:
        raise ConfigError("layout.outer_dp_sharding", f"must be one of {', '.join(OUTER_DP_SHARDINGS)}")
    if layout.dp_instances > 1 and layout.zero_stage < 1:  # megatron/core/distributed/distributed_data_parallel.py
        raise ConfigError(
            "layout.dp_instances",
            "Partial DistOpt cannot be used without DistOpt (add --use-distributed-optimizer, or set zero_stage 1)",
        )
    if layout.dp_instances > 1 and orthogonalized(layout.optimizer):  # megatron/core/optimizer/__init__.py
        raise ConfigError(
            "layout.dp_instances",
            "Layer-wise + DistributedOptimizer split path does not yet support num_distributed_optimizer_instances > 1 "
            "(Megatron-Core, Muon's layer-wise distributed optimizer)",
        )
    if layout.outer_dp_sharding == "optim" and (layout.zero_stage < 3 or layout.dp_instances < 2):
        raise ConfigError(  # megatron/training/arguments.py --outer-dp-sharding-strategy; Megatron-Bridge's HSDP recipes
            "layout.outer_dp_sharding",
            'The "optim" option is only supported when --data-parallel-sharding-strategy is "optim_grads_params", '
            "across more than one instance (--num-distributed-optimizer-instances > 1)",
        )


def check_step(layout: HybridLayout, dp: int, cp: int, expert_dp: int) -> None:
    """The instances divide the step's DP groups (megatron/core/parallel_state.py); moesim's rings need whole DP
    replicas per instance."""
    instances = layout.dp_instances
    if instances == 1:
        return
    if (dp * cp) % instances:
        raise ConfigError(
            "layout.dp_instances", "Data parallel size should be divisible by partial DistOpt shard factor"
        )
    if expert_dp % instances:
        raise ConfigError(
            "layout.dp_instances", "Expert data parallel size should be divisible by partial DistOpt shard factor"
        )
    if dp % instances:
        raise ConfigError(
            "layout.dp_instances",
            f"moesim splits whole DP replicas into instances: DP {dp} is not a multiple of {instances} (choose a divisor"
            f" of {dp})",
        )


def inner(group_dp: int, layout: HybridLayout) -> int:
    """GPUs of one instance of a DP group of ``group_dp``: what its ZeRO shards and FSDP units spread over."""
    return group_dp // layout.dp_instances


def optimizer_ways(group_dp: int, layout: HybridLayout) -> int:
    """GPUs a DP group's optimizer state is sharded over: its instance, or the whole group under Hybrid-FSDP."""
    return group_dp if layout.outer_dp_sharding == "optim" else inner(group_dp, layout)


def outer_grad_factor(layout: HybridLayout) -> float:
    """The cross-instance gradient reduction as reduce-scatters' worth of the shard: an all-reduce 2, Hybrid-FSDP's
    reduce-scatter 1."""
    return 1.0 if layout.outer_dp_sharding == "optim" else 2.0


def fitted(layout: HybridLayout, gpus: int, changes: Mapping[str, object]) -> dict[str, object]:
    """The layout's DP instances once ``changes`` (its parallel sizes: intra_size, cp, pp, ep, etp, ffn) apply on
    ``gpus`` GPUs: as many as divide the new DP and expert DP, up to its own (their greatest common divisor); one
    turns the outer sharding off. Empty where it runs one. What ``moesim search`` keeps of a job's instances."""
    if layout.dp_instances == 1:
        return {}

    def get(name: str) -> object:
        return changes.get(name, getattr(layout, name))

    intra, pp = int(get("intra_size")), int(get("pp"))
    experts = (int(get("ep")) or intra) * int(get("etp")) if get("ffn") == "ep" else intra
    instances = math.gcd(layout.dp_instances, gpus // (intra * int(get("cp")) * pp), gpus // (experts * pp))
    return {"dp_instances": instances, "outer_dp_sharding": layout.outer_dp_sharding if instances > 1 else "no_shard"}
