"""The Muon optimizer (layout.optimizer "muon"; workloads/specs/muon.py): which weights it orthogonalizes, the
Newton-Schulz GEMMs it runs per GPU, its states, and Megatron-LM's --optimizer flags. Hand-computed."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.optimizer_step import newton_schulz_s
from simulator.engine.engine import optimizer_s
from simulator.memory.per_gpu import stage_memory
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.graph.optimizer_work import optimizer_shard, stage_newton_schulz
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model
from workloads.ops import LayerKind
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec, model_preset
from workloads.specs.muon import layer_matrices, mtp_matrices, newton_schulz_gemms

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
# 4 layers, hidden 1,024, 8 query heads of 128 in 2 KV groups, SwiGLU 4,096, vocabulary 1,024
DENSE = ModelSpec("d", 4, 1024, 8, 2, 0, 0, 0, 1024, dense_ffn_size=4096, rope=True)
LAYOUT = LayoutSpec("t", attention="tp", ffn="tp", intra_size=2, pp=2, recompute="none", grad_sync="fp32-rs")
MUON = LAYOUT.with_(optimizer="muon")
GPT_1B = (
    "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 "
    "--micro-batch-size 1 --global-batch-size 8 --vocab-size 1024 --bf16 --tensor-model-parallel-size 2 "
)


def ns_flops(rows: int, cols: int, steps: int = 5) -> float:
    """Newton-Schulz on a rows x cols matrix: X X^T, A A, B X per step, m the smaller side."""
    m, n = min(rows, cols), max(rows, cols)
    return steps * (2 * m * m * n + 2 * m**3 + 2 * m * m * n)


def test_the_matrices_are_every_weight_but_the_embeddings_norms_and_conv() -> None:
    # GQA: q 1,024 x 1,024, k and v 256 x 1,024 each (2 groups of 128), proj; SwiGLU fc1 8,192 x 1,024, fc2
    shapes = [(m.rows, m.cols, m.count, m.split) for m in layer_matrices(DENSE, LayerKind(True, 0))]
    assert shapes == [
        (1024, 1024, 1, "rows"),
        (256, 1024, 2, "rows"),
        (1024, 1024, 1, "cols"),
        (8192, 1024, 1, "rows"),
        (1024, 4096, 1, "cols"),
    ]
    files = ("kimi-k2", "qwen3-235b-a22b", "nemotron-3-nano-30b-a3b", "gpt-oss-120b", "gpt3-5b")
    models = [load_model(MODELS / f"{name}.json") for name in files[:-1]] + [load_model(MODELS / "gpt3-5b.yaml")]
    models += [model_preset("deepseek-v3"), models[1].with_(moe_latent_size=1024)]  # no MLA query rank; latent MoE
    for model in models:
        for layer in range(model.num_layers):
            kind = model.layer_kind(layer)
            parts = model.layer_parts(kind.dense, kind.block)
            matrices = sum(m.rows * m.cols * m.count for m in layer_matrices(model, kind))
            adam = parts.norms  # the layer's norms; MLA's latent norms; a Mamba mixer's conv, A, D, dt bias, norm
            if model.attention == "mla" and kind.block in ("", "attention"):
                adam += model.q_lora_rank + model.kv_lora_rank
            if kind.block == "mamba":
                adam += model.mamba_params - model.hidden_size * (model.mamba_in_proj_width + model.mamba_inner)
            assert matrices == parts.total() - adam, (model.name, layer)
    mtp = model_preset("deepseek-v3").with_(
        mtp_layers=1
    )  # one MTP module: its two norms, the 2h -> h projection, one MoE layer
    adam = 2 * mtp.hidden_size + 2 * mtp.hidden_size + mtp.q_lora_rank + mtp.kv_lora_rank
    assert sum(m.rows * m.cols * m.count for m in mtp_matrices(mtp)) == mtp.mtp_params - adam


def test_newton_schulz_gemms_follow_the_tp_mode() -> None:
    whole = newton_schulz_gemms(8192, 1024, 2, "rows", "duplicated", 5)
    assert [(g.m, g.n, g.k, g.groups) for g in whole] == [
        (1024, 1024, 8192, 5),
        (1024, 1024, 1024, 5),
        (1024, 8192, 1024, 5),
    ]
    assert sum(g.flops for g in whole) == ns_flops(8192, 1024)
    assert sum(g.flops for g in newton_schulz_gemms(8192, 1024, 2, "rows", "blockwise", 5)) == ns_flops(4096, 1024)
    # distributed: the Gram matrix and B X on the local n / t columns, A A whole
    distributed = sum(g.flops for g in newton_schulz_gemms(8192, 1024, 2, "rows", "distributed", 5))
    assert distributed == 5 * (2 * 1024**2 * 4096 * 2 + 2 * 1024**3)
    assert newton_schulz_gemms(1024, 256, 2, "", "blockwise", 3) == newton_schulz_gemms(
        1024, 256, 1, "rows", "blockwise", 3
    )


def test_each_gpu_runs_its_dp_share_of_the_stage_s_newton_schulz() -> None:
    per_layer = sum(
        ns_flops(r, c) * n for r, c, n in ((1024, 1024, 2), (256, 1024, 2), (8192, 1024, 1), (1024, 4096, 1))
    )
    for gpus, dp in ((4, 1), (8, 2), (16, 4)):
        workload = StepWorkload(DENSE, MUON, gpus, 8, 16, 1024)
        runs = stage_newton_schulz(workload, 0)
        assert sum(g.flops * n for g, n in runs) == pytest.approx(
            2 * per_layer / dp
        )  # 2 layers a stage, whole (duplicated)
        not_sharded = StepWorkload(DENSE, MUON.with_(zero_stage=0), gpus, 8, 16, 1024)
        assert sum(g.flops * n for g, n in stage_newton_schulz(not_sharded, 0)) == pytest.approx(2 * per_layer)
    assert stage_newton_schulz(StepWorkload(DENSE, LAYOUT, 8, 8, 16, 1024), 0) == []
    # one kernel per step, so twice the steps take twice the time, and a DP group twice as large half of it
    gpu, cal = cluster_preset("h100", 8).gpu, DEFAULT_CALIBRATION

    def ns_s(layout: LayoutSpec, gpus: int) -> float:
        return newton_schulz_s(stage_newton_schulz(StepWorkload(DENSE, layout, gpus, 8, 16, 1024), 0), gpu, cal)

    assert all(g.sequential for g, _ in stage_newton_schulz(StepWorkload(DENSE, MUON, 8, 8, 16, 1024), 0))
    assert ns_s(MUON.with_(muon_ns_steps=10), 8) == pytest.approx(2 * ns_s(MUON, 8))
    assert ns_s(MUON, 16) == pytest.approx(ns_s(MUON, 8) / 2) and ns_s(MUON, 8) > 0


def test_muon_keeps_a_master_weight_and_one_momentum_adam_the_embeddings() -> None:
    adam, muon = StepWorkload(DENSE, LAYOUT, 8, 8, 16, 1024), StepWorkload(DENSE, MUON, 8, 8, 16, 1024)
    dense = adam.stage_param_groups(0)[0]
    embedding = 1024 * 1024 / 2  # stage 0's input embedding, vocabulary-parallel over TP 2
    assert optimizer_shard(muon, 0) == (dense.trained / 2, embedding / 2)  # ZeRO-1 over DP 2
    assert optimizer_shard(adam, 0) == (dense.trained / 2, dense.trained / 2)
    assert stage_memory(adam, 0).optimizer_bytes == pytest.approx(dense.trained * 12 / 2)
    expected = (embedding * 12 + (dense.trained - embedding) * 8) / 2
    assert stage_memory(muon, 0).optimizer_bytes == pytest.approx(expected)
    gpu = cluster_preset("h100", 8).gpu
    assert optimizer_s(muon, 0, gpu, DEFAULT_CALIBRATION) > optimizer_s(adam, 0, gpu, DEFAULT_CALIBRATION)


def test_megatron_optimizer_flags() -> None:
    def layout(flags: str) -> LayoutSpec:
        job = parse_megatron_args(GPT_1B + flags)
        return job.resolve(DENSE).layout

    assert (layout("").optimizer, layout("--use-distributed-optimizer").zero_stage) == ("adam", 1)
    dist = layout("--optimizer dist_muon --overlap-grad-reduce --overlap-param-gather --muon-tp-mode blockwise")
    assert (dist.optimizer, dist.zero_stage, dist.muon_tp_mode, dist.muon_ns_steps) == ("muon", 1, "blockwise", 5)
    plain = layout("--optimizer muon --muon-num-ns-steps 8")
    assert (plain.optimizer, plain.zero_stage, plain.muon_tp_mode, plain.muon_ns_steps) == ("muon", 0, "duplicated", 8)
    assert layout("--optimizer muon --use-distributed-optimizer").zero_stage == 1
    with pytest.raises(ConfigError, match="lion"):
        layout("--optimizer lion")
    with pytest.raises(ConfigError, match="megatron-fsdp"):
        layout("--optimizer muon --use-megatron-fsdp")
    with pytest.raises(ConfigError, match="optimizer"):
        StepWorkload(DENSE, MUON.with_(zero_stage=3), 8, 8, 16, 1024)


def test_adaptive_muon_adds_adamuons_second_moment() -> None:
    """--optimizer adaptive_muon: Muon's Newton-Schulz GEMMs and momentum, and AdaMuon's elementwise FP32 second moment
    (Emerging-Optimizers AdaptiveMuon, moment2_method "adamuon"): 4 + 4 + 4 bytes per matrix parameter."""
    adaptive = StepWorkload(DENSE, MUON.with_(optimizer="adaptive_muon"), 8, 8, 16, 1024)
    muon = StepWorkload(DENSE, MUON, 8, 8, 16, 1024)
    assert stage_newton_schulz(adaptive, 0) == stage_newton_schulz(muon, 0)
    dense, embedding = muon.stage_param_groups(0)[0], 1024 * 1024 / 2
    expected = (embedding * 12 + (dense.trained - embedding) * 12) / 2
    assert stage_memory(adaptive, 0).optimizer_bytes == pytest.approx(expected)
    gpu = cluster_preset("h100", 8).gpu
    assert optimizer_s(adaptive, 0, gpu, DEFAULT_CALIBRATION) > optimizer_s(muon, 0, gpu, DEFAULT_CALIBRATION)
    job = parse_megatron_args(GPT_1B + "--optimizer adaptive_muon --use-distributed-optimizer").resolve(DENSE)
    assert (job.layout.optimizer, job.layout.zero_stage) == ("adaptive_muon", 1)
