"""What to try when a configuration cannot run: the nearest values that would, as command-line flags.

Each function returns a short "; try ..." clause that the validation rules and the memory check append to
their one-line errors (an empty string when nothing nearby fits).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from workloads.schedules.registry import block_count, per_unit_comm_runs

if TYPE_CHECKING:
    from workloads.specs.layouts import LayoutSpec
    from workloads.specs.models import ModelSpec


def nearest_multiples(value: int, unit: int) -> list[int]:
    """The multiples of ``unit`` just below and just above ``value`` (positive ones only)."""
    below, above = value // unit * unit, (value // unit + 1) * unit
    return [m for m in (below, above) if m > 0 and m != value]


def _pp_that_fit(model: ModelSpec, layout: LayoutSpec, num_gpus: int) -> list[int]:
    """Pipeline degrees that divide the cluster (and the layers, unless uneven_pp), nearest to layout.pp first."""
    unit = layout.intra_size * layout.cp
    # NOTE: a stage holds at least one layer, so pp <= num_layers also bounds the loop for absurd GPU counts
    fits = [
        pp
        for pp in range(1, min(num_gpus // unit, model.num_layers) + 1)
        if num_gpus % (unit * pp) == 0
        and (
            layout.uneven_pp
            or layout.block_layers
            or layout.balance_blocks
            or model.num_layers % block_count(layout.schedule, pp, layout.virtual_stages) == 0
        )
    ]
    return sorted(fits, key=lambda pp: (abs(pp - layout.pp), -pp))[:3]


def gpus_hint(model: ModelSpec, layout: LayoutSpec, num_gpus: int) -> str:
    """Clause for a GPU count that intra_size x cp x pp does not divide: the nearest counts, or a pp that fits."""
    counts = nearest_multiples(num_gpus, layout.intra_size * layout.cp * layout.pp)
    options = [f"--gpus {' or '.join(map(str, counts))}"] if counts else []
    pps = _pp_that_fit(model, layout, num_gpus)
    if pps:
        others = f" (or {', '.join(map(str, pps[1:]))})" if len(pps) > 1 else ""
        options.append(f"--set pp={pps[0]}{others}")
    return f"; try {', or '.join(options)}" if options else ""


def ep_hint(model: ModelSpec, layout: LayoutSpec, num_gpus: int, fits: list[int]) -> str:
    """Clause for an EP x ETP group that the stage's GPUs do not take: the EP degrees that fit (``fits``, nearest
    first), else a pp or a GPU count whose stages hold the group."""
    group = layout.ep_degree * layout.etp
    if group % layout.intra_size == 0:  # the group is whole: a stage of more GPUs takes it
        pps = [pp for pp in _pp_that_fit(model, layout, num_gpus) if (num_gpus // pp) % group == 0]
        unit = layout.intra_size * layout.cp  # a stage's GPUs: a multiple of unit and of the group
        step = layout.pp * unit * group // math.gcd(unit, group)
        counts = [count for count in nearest_multiples(num_gpus, step) if count > num_gpus]
    else:
        pps, counts = [], []
    nearest = sorted(fits, key=lambda ep: (abs(ep - layout.ep_degree), -ep))[:2]
    options = [f"--set ep={' or '.join(map(str, nearest))}"] if nearest else []
    options += [f"--set pp={pps[0]}"] if pps else []
    options += [f"--gpus {counts[0]}"] if counts else []
    return f"; try {', or '.join(options)}" if options else ""


def batch_hint(global_batch: int, unit: int) -> str:
    """Clause for a global batch that dp x micro_batch does not divide: the nearest batches that it does."""
    counts = nearest_multiples(global_batch, unit)
    return f"; try --global-batch {' or '.join(map(str, counts))}" if counts else ""


def pp_layers_hint(model: ModelSpec, layout: LayoutSpec, num_gpus: int) -> str:
    """Clause for layers that the pipeline's blocks do not divide: a pp that fits, or uneven stages."""
    pps = [pp for pp in _pp_that_fit(model, layout, num_gpus) if pp != layout.pp]
    fits = f" or --set pp={pps[0]}" if pps else ""
    return f"; try --set uneven_pp=true{fits}"


# The option that cuts each memory term, as a --set flag, in the order tried (the first that changes something).
# SAR is tried for a model with MoE layers, whose Megatron form recomputes the MoE activation (MEGATRON_CUTS); a dense
# model's nearest Megatron cut recomputes its whole MLP (--recompute-modules mlp) instead.
DENSE_SELECTIVE = "--set recompute=selective --set recompute_modules=[core_attn,layernorm,mlp]"
ONE_INSTANCE = "--set dp_instances=1 (shard over all of DP, not one instance)"  # workloads/specs/hybrid_dp.py
MEMORY_CUTS = {
    "params": (
        ("zero_stage", 3, "--set zero_stage=3 (shard weights over DP)"),
        ("dp_instances", 1, ONE_INSTANCE),
        ("pp", None, "a larger --set pp"),
    ),
    "grads": (
        # Megatron-Bridge's recipes keep BF16 gradient buffers (grad_reduce_in_fp32 False): half of FP32's
        ("main_grads_dtype", "bf16", "--set main_grads_dtype=bf16 (BF16 gradient buffers)"),
        ("zero_stage", 2, "--set zero_stage=2 (shard gradients over DP)"),
        ("dp_instances", 1, ONE_INSTANCE),
    ),
    "optimizer": (
        ("zero_stage", 1, "--set zero_stage=1 (distributed optimizer)"),
        ("dp_instances", 1, ONE_INSTANCE),
        ("exp_avg_dtype", "bf16", "--set exp_avg_dtype=bf16 --set exp_avg_sq_dtype=bf16"),
    ),
    "activations": (
        ("sequence_parallel", True, "--set sequence_parallel=true (Megatron's --sequence-parallel)"),
        ("recompute", "sar", "--set recompute=sar"),
        ("recompute_modules", "mlp", DENSE_SELECTIVE),
        ("recompute", "full", "--set recompute=full"),
        ("micro_batch", 1, "--micro-batch 1"),
    ),
    "buffers": (("capacity_factor", 1.0, "--set capacity_factor=1.0"),),
}
SAR_MODULES = {"moe_act", "layernorm"}  # the --recompute-modules that stand for SAR under Megatron (MEGATRON_CUTS)
_STRONGER = {"recompute": ("none", "selective", "sar", "full"), "zero_stage": (0, 1, 2, 3)}


def _cuts(layout: LayoutSpec, field: str, value: object) -> bool:
    """Whether setting ``field`` to ``value`` would shrink its memory term (None: a larger value of the field)."""
    current = getattr(layout, field)
    if value is None:
        return True
    if field == "recompute_modules":  # a module added to selective recomputation (from none or selective)
        return layout.recompute in ("none", "selective") and value not in current
    if (field, value, current) == ("recompute", "sar", "selective") and SAR_MODULES <= set(layout.recompute_modules):
        return False  # its Megatron flags (MEGATRON_CUTS) are already set: the next, stronger cut is the hint
    if field == "zero_stage" and value >= 2 and not per_unit_comm_runs(layout.schedule, layout.ep_overlap):
        return False  # the per-unit gathers and scatters are refused there (workloads.graph.fsdp.check_unit_schedule)
    if field in _STRONGER:
        return _STRONGER[field].index(current) < _STRONGER[field].index(value)
    if isinstance(value, (str, bool)):
        return current != value
    return current > value


# The same cuts as Megatron-LM flags (arguments.py at d98e8a64dd), for a job given as --megatron-args: what Megatron
# can run. SAR has no Megatron flag: its place is taken by selective recomputation of the MoE activation and norms
# (--recompute-modules, TransformerConfig.recompute_modules).
MEGATRON_CUTS = {
    "--set zero_stage=3 (shard weights over DP)": (
        "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params (shard weights over DP)"
    ),
    "--set zero_stage=2 (shard gradients over DP)": (
        "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads (shard gradients over DP)"
    ),
    "--set zero_stage=1 (distributed optimizer)": "--use-distributed-optimizer",
    "--set main_grads_dtype=bf16 (BF16 gradient buffers)": "--grad-reduce-in-bf16 (BF16 gradient buffers)",
    ONE_INSTANCE: "--num-distributed-optimizer-instances 1 (shard over all of DP, not one instance)",
    "--set exp_avg_dtype=bf16 --set exp_avg_sq_dtype=bf16": (
        "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16"
    ),
    "--set sequence_parallel=true (Megatron's --sequence-parallel)": "--sequence-parallel",
    "--set recompute=sar": "--recompute-granularity selective --recompute-modules moe_act layernorm",
    DENSE_SELECTIVE: "--recompute-granularity selective --recompute-modules core_attn layernorm mlp",
    "--set recompute=full": "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
    "--micro-batch 1": "--micro-batch-size 1",
    "--set capacity_factor=1.0": "--moe-expert-capacity-factor 1.0",
    "a larger --set pp": "a larger --pipeline-model-parallel-size",
    "--set pp=": "--pipeline-model-parallel-size ",  # gpus_hint, pp_layers_hint and ep_hint
    "--set ep=": "--expert-model-parallel-size ",  # ep_hint
    "try --global-batch ": "try --global-batch-size ",  # batch_hint
    "or --allow-oom (allow_oom=True)": "or moesim's --allow-oom to simulate it anyway",
}


def in_megatron_words(rule: str) -> str:
    """A hint with each moesim option replaced by the Megatron-LM flags that do the same."""
    for moesim, megatron in MEGATRON_CUTS.items():
        rule = rule.replace(moesim, megatron)
    return rule


def memory_hint(terms: dict[str, float], layout: LayoutSpec, moe: bool = True) -> str:
    """Clause for an out-of-memory layout: the biggest term (GiB) and the first option that cuts it (SAR for a model
    with MoE layers, ``moe``; the whole MLP's selective recomputation for a dense one)."""
    term = max(terms, key=terms.__getitem__)
    skipped = ("recompute_modules", "mlp") if moe else ("recompute", "sar")
    cuts = [cut for cut in MEMORY_CUTS[term] if cut[:2] != skipped]
    flag = next((flag for field, value, flag in cuts if _cuts(layout, field, value)), "a larger --set pp")
    return f"; the biggest term is {term} ({terms[term]:.1f} GiB): try {flag}, more GPUs, or --allow-oom"
