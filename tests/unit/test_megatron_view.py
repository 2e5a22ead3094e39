"""A Megatron job answered in Megatron's words: the layout understood, memory terms, ignored flags, hints."""

from __future__ import annotations

import pytest

from experiments.cli.main import main
from experiments.cli.megatron_view import ignored_line, memory_terms, understood
from topologies.errors import ConfigError
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_args import IgnoredArg
from workloads.specs.hints import MEGATRON_CUTS, MEMORY_CUTS, in_megatron_words
from workloads.specs.layouts import layout_preset

QWEN = ["--model", "qwen3-30b-a3b", "--cluster", "h100", "--gpus", "16"]
SCRIPT = "examples/megatron/qwen3-30b-a3b-h100-16.sh"


def test_understood_names_megatron_s_degrees_and_options() -> None:
    layout = layout_preset("megatron-lm")  # TP 8 with SP, experts under TP, full recompute (the paper's baseline)
    line = understood(layout, 240, "h800")
    assert line.startswith("TP 8 (SP), EP 8, ETP 1, CP 1, PP 15, VP 1, DP 2;") and line.endswith("; 240 x h800")
    assert "recompute full" in line and "--use-distributed-optimizer" in line
    # a dense model: no EP or ETP degree to name
    assert understood(layout, 240, "h800", experts=False).startswith("TP 8 (SP), no experts, CP 1, PP 15,")
    muon = understood(layout.with_(optimizer="muon", muon_tp_mode="blockwise"), 240, "h800")
    assert "--optimizer muon (layer-wise distributed, 5 Newton-Schulz steps, blockwise)" in muon
    fp4 = layout.with_(
        gemm_dtype="fp8", fp8_recipe="nvfp4", bf16_last_layers=14, module_precisions=("*.linear_qkv=bf16",)
    )
    assert "FP8 (nvfp4, last 14 layers BF16, 1 module rules)" in understood(fp4, 240, "gb300")
    # dropout named where on (Megatron-LM's default 0.1 for a model the flags alone give)
    assert "dropout" not in line
    assert "; BF16; --hidden-dropout 0.1 --attention-dropout 0; 240 x h800" in understood(
        layout, 240, "h800", True, (0.1, 0)
    )
    # an --fp16 job: its 16-bit GEMMs are timed as BF16's, and said as the job gave them
    assert "; FP16; 240 x h800" in understood(layout, 240, "h800", fp16=True)


def test_memory_terms_of_the_peak_stage_and_ignored_in_one_line() -> None:
    stages = [{"params": 1.0, "activations": 2.0, "total": 3.0}, {"params": 1.5, "activations": 4.0, "total": 5.5}]
    assert memory_terms(stages) == "params 1.5, activations 4.0 GiB"
    flags = tuple(IgnoredArg(f"--f{i}", "no effect") for i in range(8))
    expected = "8 flags (--f0, --f1, --f2, --f3, --f4, --f5 and 2 more); --json lists each with its reason"
    assert ignored_line(flags) == expected
    assert ignored_line(()) == "none"


def test_every_memory_cut_has_its_megatron_flags() -> None:
    texts = {text for cuts in MEMORY_CUTS.values() for _, _, text in cuts}
    assert texts <= set(MEGATRON_CUTS)
    rule = "...: try --set recompute=sar, more GPUs, or --allow-oom (allow_oom=True)"
    assert in_megatron_words(rule) == (
        "...: try --recompute-granularity selective --recompute-modules moe_act layernorm, more GPUs, "
        "or moesim's --allow-oom to simulate it anyway"
    )


def test_an_out_of_memory_megatron_job_is_told_megatron_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *QWEN, "--megatron-args", SCRIPT, "--micro-batch", "8"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("moesim: error: memory:") and "--recompute-granularity" in error and "--set" not in error
    job = parse_megatron_args(SCRIPT)
    assert "--set" not in str(job.explain(ConfigError("memory", "x: try --set zero_stage=1 (distributed optimizer)")))


def test_a_megatron_job_is_told_its_layout_and_batch_fixes_in_megatron_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The pipeline degree and global batch a hint proposes are named by Megatron's flags for a Megatron job, by
    moesim's for its own (workloads/specs/hints.py MEGATRON_CUTS)."""
    flags = "--bf16 --swiglu --moe-grouped-gemm --seq-length 4096 --global-batch-size "
    assert main(["run", *QWEN, "--megatron-args", flags + "64 --pipeline-model-parallel-size 5"]) == 2
    error = capsys.readouterr().err
    assert "or --pipeline-model-parallel-size 4 (or 8, 2)" in error and "--set" not in error
    assert main(["run", *QWEN, "--megatron-args", flags + "63"]) == 2
    assert "try --global-batch-size 48 or 64" in capsys.readouterr().err
    assert main(["run", *QWEN]) == 2  # moesim's default layout (intra_size x pp = 120): its hint in moesim's flags
    assert "or --set pp=2 (or 1)" in capsys.readouterr().err


def test_the_run_report_of_a_megatron_job(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *QWEN, "--megatron-args", SCRIPT]) == 0
    lines = {line[:18].strip(): line[19:] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert lines["understood"].startswith("TP 1, EP 16, ETP 1, CP 1, PP 1, VP 1, DP 16;")
    assert "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep" in lines["understood"]
    assert lines["memory terms"].startswith("params ") and lines["ignored"] == "none"
