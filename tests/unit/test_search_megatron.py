"""``moesim search --megatron-args``: Megatron-Core's layout space around a user's job, and the fastest as the
Megatron-LM arguments that set it (experiments/search/megatron.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from experiments.cli.main import main
from experiments.search.megatron import caveats, megatron_flags, write_base
from experiments.search.space import Job, SearchSpace, layouts
from simulator.report.simulate import simulate
from topologies.cluster import cluster_preset
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_layout, load_model

QWEN = "examples/models/qwen3-30b-a3b.json"
LLAMA = "examples/models/llama-3.1-8b.json"
JOB = "--bf16 --swiglu --untie-embeddings-and-output-weights --use-distributed-optimizer --seq-length 4096"


def test_the_space_is_what_megatron_core_runs(tmp_path: Path) -> None:
    """TP attention only, 1F1B (with and without EP overlap at one stage) or interleaved, no SAR, the job's
    dispatcher kept in every point's base (and among those its EP points try)."""
    base = write_base(f"{JOB} --expert-model-parallel-size 8 --moe-token-dispatcher-type alltoall", QWEN, 16, tmp_path,
                      64, None)  # fmt: skip
    assert (base.global_batch, base.seq_len) == (64, 4096)
    layout = load_layout(base.layout_path)
    assert layout.sequence_parallel and layout.token_dispatcher == "alltoall"
    job = Job(16, 8, 64, 4096, cluster_preset("h100", 16).gpu.hbm_bytes)
    points, _ = layouts(load_model(base.model_path), layout, job, SearchSpace.megatron())
    assert points and {p["attention"] for p in points} == {"tp"}
    assert {p["schedule"] for p in points} <= {"1f1b", "interleaved"}
    assert {p["recompute"] for p in points} <= {"none", "selective", "full"}
    assert {p["ep_overlap"] for p in points if p["pp"] == 1} == {False, True}


def test_the_jobs_own_selective_modules_are_searched(tmp_path: Path) -> None:
    """GPT-OSS-120B's recipe recomputes layernorm and moe_act: among the selective choices the search tries."""
    flags = f"{JOB} --expert-model-parallel-size 8 --moe-grouped-gemm --recompute-granularity selective --recompute-modules layernorm moe_act"
    base = write_base(flags, QWEN, 16, tmp_path, 64, None)
    assert base.recompute_modules == ("layernorm", "moe_act")
    selective = SearchSpace.megatron(0, base.recompute_modules).recompute_tiers[1]
    assert [choice["recompute_modules"] for choice in selective] == [
        ("layernorm", "moe_act"),
        ("core_attn", "layernorm", "moe_act"),
        ("core_attn", "layernorm"),
    ]


def test_flags_by_hand(tmp_path: Path) -> None:
    """Qwen3-30B-A3B's 48 layers over 5 stages: the last, then the first stage take one fewer (9, 10, 10, 10, 9),
    as a Megatron layout string; selective recomputation as its modules."""
    base = write_base(f"{JOB} --tensor-model-parallel-size 2 --expert-model-parallel-size 8", QWEN, 40, tmp_path,
                      40, None)  # fmt: skip
    row = {"model": base.model_path, "gpus": "40", "cluster": "h100", "global_batch": "40", "seq_len": "4096"}
    layout = load_layout(base.layout_path).with_(
        pp=5, uneven_pp=True, recompute="selective", recompute_modules=("core_attn", "moe_act")
    )
    assert megatron_flags(layout, row) == (
        "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 5 "
        "--pipeline-model-parallel-layout 'Et*9|(t*10|)*3t*9L' --context-parallel-size 1 "
        "--expert-model-parallel-size 8 --expert-tensor-parallel-size 1 --moe-token-dispatcher-type allgather "
        "--micro-batch-size 1 "
        "--recompute-granularity selective --recompute-modules core_attn moe_act"
    )


def test_the_printed_arguments_simulate_the_top_row(capsys: pytest.CaptureFixture[str]) -> None:
    """Round trip: the job's other flags with the printed ones, read back by --megatron-args, simulate the
    step time the search ranked first; at TP 1 the job's --tp-comm-overlap is to be dropped (Megatron refuses it)."""
    job = f"{JOB} --global-batch-size 32 --tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap"
    argv = ["search", "--model", LLAMA, "--cluster", "h100", "--gpus", "8", "--megatron-args", job, "--quiet"]
    assert main([*argv, "--fix", "cp=1", "--fix", "micro_batch=1", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "keeps the Megatron-LM job's own settings" in out
    step_s = float(re.search(r"\s(\d+\.\d{3})\s+[\d,]+\s+[\d.]+%", out.splitlines()[2]).group(1))  # row 1
    flags = re.search(r"fastest, as Megatron-LM arguments: (.*)", out).group(1)  # the whole job
    assert "--expert-model-parallel-size" not in flags  # a dense model: no expert flags
    assert out.splitlines()[2].split()[1:3] == ["tp", "-"]  # attention TP, no experts
    assert ("drop the job's --tp-comm-overlap" in out) == ("--tensor-model-parallel-size 1 " in flags)
    assert "--global-batch-size 32 --seq-length 4096" in flags and flags.count("--tensor-model-parallel-size") == 1
    run = parse_megatron_args(flags).resolve(load_model(LLAMA), None, 8)
    report = simulate(run.model, run.layout, 8, cluster="h100", global_batch=32, seq_len=4096)
    assert f"{report.step_time_s:.3f}" == f"{step_s:.3f}"


def test_caveats(tmp_path: Path) -> None:
    """Cross-node EP overlap over NCCL's all-to-all is flagged (over-credited on the matched pair); in-node EP, or
    DeepEP's dispatcher, is not; --tp-comm-overlap at TP 1 is to be dropped."""
    base = write_base(f"{JOB} --expert-model-parallel-size 16 --moe-token-dispatcher-type alltoall", QWEN, 16, tmp_path,
                      64, None)  # fmt: skip
    layout = load_layout(base.layout_path).with_(ep_overlap=True, delay_wgrad=True)
    assert [line.split(":")[0] for line in caveats(layout, 8)] == ["caution"]
    assert caveats(layout.with_(ep=8), 8) == []
    assert caveats(layout.with_(token_dispatcher="flex-deepep"), 8) == []
    assert caveats(layout.with_(ep_overlap=False, delay_wgrad=False, tp_comm_overlap=True), 8)[0].startswith("and drop")
