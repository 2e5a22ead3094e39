"""Useful FLOPs: the model FLOPs of routed token copies only, without capacity padding or dropped copies."""

from __future__ import annotations

import math

from simulator.report.bounds import shape_task_counts
from workloads.graph.step import StepWorkload
from workloads.recipes.moe import layout_ep_plan

EXPERT_GEMMS = ("expert_fc13", "expert_fc2")  # workloads.recipes.moe._expert_steps (fused names start with these)


def expert_row_share(workload: StepWorkload) -> float:
    """Token copies an expert GEMM processes (routed, less those dropped) over the rows it runs (capacity-padded
    or, dropless, the busiest GPU's); every expert GEMM (forward, input and weight gradient) scales with rows."""
    model, layout = workload.model, workload.layout
    seq = workload.seq_len // layout.cp
    if layout.ffn != "ep":  # TP experts: every GPU runs all experts on the gathered copies
        copies = layout.micro_batch * seq * model.top_k / model.num_experts
        return min(copies / math.ceil(copies * layout.capacity_factor), 1.0)
    plan = layout_ep_plan(model, layout, seq, workload.gpus_per_node)
    local = layout.micro_batch * seq // layout.intra_size
    copies = local * model.top_k * layout.etp / plan.experts_local * (1 - plan.dropped_fraction)
    return min(copies / plan.rows_per_expert, 1.0)


def useful_fraction(workload: StepWorkload) -> float:
    """Useful over counted model FLOPs of the step (1 for dense models and dropless uniform routing)."""
    if not workload.model.num_experts:
        return 1.0
    share = expert_row_share(workload)
    counted = useful = 0.0
    # Tasks differ in their ops by stage, phase and chunks only: count those (once per schedule shape: points
    # of a reproduction share a few), build one key each.
    for (stage, task), times in shape_task_counts(workload.schedule.shape).items():
        for op in workload.task_ops(workload.task_key(stage, task)):
            counted += op.model_flops * times
            useful += op.model_flops * times * (share if op.name.startswith(EXPERT_GEMMS) else 1.0)
    return useful / counted if counted else 1.0
