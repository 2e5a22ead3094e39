"""The optimizer's work per GPU of a stage beyond its memory-bound passes: under Muon (workloads/specs/muon.py), the
Newton-Schulz GEMMs of the weights the GPU orthogonalizes, and the parameters Adam keeps (embedding, output)."""

from __future__ import annotations

from collections import Counter

from workloads.graph.step import StepWorkload
from workloads.ops import Gemm
from workloads.specs.hybrid_dp import optimizer_ways
from workloads.specs.muon import layer_matrices, mtp_matrices, newton_schulz_gemms, orthogonalized


def optimizer_shard(workload: StepWorkload, stage: int) -> tuple[float, float]:
    """(parameters of the GPU's optimizer shard, of them those Adam updates): the trained parameters, ZeRO-1 and up
    sharded over each group's DP (its instance's, workloads/specs/hybrid_dp.py optimizer_ways); Adam updates all of them, or under Muon the embedding and the output layer (its
    norms and biases are counted with the matrices)."""
    layout = workload.layout
    zero = layout.zero_stage >= 1
    shard = sum(g.trained / (optimizer_ways(g.dp, layout) if zero else 1) for g in workload.stage_param_groups(stage))
    if not orthogonalized(layout.optimizer):
        return shard, shard
    return shard, workload.embedding_params(stage) / (optimizer_ways(workload.dp * layout.cp, layout) if zero else 1)


def stage_newton_schulz(workload: StepWorkload, stage: int) -> list[tuple[Gemm, float]]:
    """The Newton-Schulz GEMMs one GPU of ``stage`` runs in a step under Muon, each with how many of it: every
    weight of the stage's layers (and MTP modules on the last block) at its TP mode's shape, times the GPU's share,
    1 / (its group's DP size) under the layer-wise distributed optimizer (zero_stage 1), else all. Empty under Adam."""
    if not orthogonalized(workload.layout.optimizer):
        return []
    key = ("newton_schulz", stage)
    if key not in workload._cache:
        workload._cache[key] = _stage_newton_schulz(workload, stage)
    return workload._cache[key]


def _stage_newton_schulz(workload: StepWorkload, stage: int) -> list[tuple[Gemm, float]]:
    layout, model = workload.layout, workload.model
    blocks = workload.schedule.stage_blocks(stage)
    matrices = [
        m for block in blocks for i in workload.block_ranges[block] for m in layer_matrices(model, model.layer_kind(i))
    ]
    if workload.schedule.blocks - 1 in blocks:
        matrices += mtp_matrices(model) * model.mtp_weight_sets
    n, ep = layout.intra_size, layout.ffn == "ep"
    dense_tp, expert_tp = 1 if layout.attention == "sp" else n, layout.etp if ep else n  # SP replicates the weights
    distributed = layout.zero_stage >= 1
    dense_share = 1 / (workload.dp * layout.cp) if distributed else 1.0
    expert_share = (1 / workload.expert_dp if distributed else 1.0) / (layout.ep_degree if ep else 1)
    runs: Counter[Gemm] = Counter()
    for matrix in matrices:
        tp, share = (expert_tp, expert_share) if matrix.expert else (dense_tp, dense_share)
        for gemm in newton_schulz_gemms(
            matrix.rows, matrix.cols, tp, matrix.split, layout.muon_tp_mode, layout.muon_ns_steps
        ):
            runs[gemm] += matrix.count * share
    return sorted(runs.items(), key=lambda item: (item[0].m, item[0].n, item[0].k))
