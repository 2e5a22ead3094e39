"""Tests for ``moesim search`` on a small model."""

from __future__ import annotations

import json
import re

import pytest

from experiments.cli.main import main
from experiments.search.search import candidates, search
from experiments.search.space import SearchSpace
from simulator.memory.per_gpu import peak_memory
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

ARGS = {"global_batch": 16, "seq_len": 2048}
NARROW = {**ARGS, "space": SearchSpace.narrow()}  # the grid of earlier releases: 73 points, simulated in seconds


def test_candidates_are_valid_and_fit() -> None:
    """Every candidate builds a workload that fits in HBM; interleaved and both modes appear (narrow space).

    The layouts whose PP divides 16 / n: n = 1 (SP+EP only) x PP 1, 2, 4, 8, 16 is 2 + 4 x 4 = 18 layouts; n = 2, 4, 8 (four
    modes) x PP 1-8, 1-4, 1-2 are 8 + 16 x 3, 8 + 16 x 2 and 8 + 16 = 56, 40 and 24: 138 in all. Pruned by
    arithmetic: the PP that do not divide 16 / n (n = 2: PP 16; n = 4: 8, 16; n = 8: 4, 8, 16; x 4 modes x 2
    schedules x 2 micro-batches = 16 + 32 + 48) and n = 1, PP 1, micro-batch 2 (DP 16 x 2 exceeds the batch
    of 16): 97. Four break a rule, all n = 1 with micro-batch 2: at PP 2-16 interleaving needs the 4, 2, 1
    micro-batches divisible by PP. Of the 133 valid, 73 fit the 80 GB and 60 do not. On one stage (PP 1)
    only attention sharded by TP over n = 8 fits: SP keeps every attention weight on every GPU."""
    points, pruned = candidates("mixtral-8x7b", 16, **NARROW)
    assert (len(points), pruned.memory, pruned.invalid, pruned.divide) == (73, 60, 4, 97)
    assert pruned.reasons == {"global_batch": 4}
    assert {(p["intra_size"], p["attention"]) for p in points if p["pp"] == 1} == {(8, "tp")}
    hbm = cluster_preset("h800", 16).gpu.hbm_bytes
    for p in points:
        layout = layout_preset("megascale-moe").with_(
            micro_batch=p["micro_batch"],
            **{k: p[k] for k in ("attention", "ffn", "intra_size", "pp", "schedule", "virtual_stages")},
        )
        workload = StepWorkload(model_preset("mixtral-8x7b"), layout, 16, 8, 16, 2048)
        assert peak_memory(workload).total_bytes <= hbm
    assert {p["schedule"] for p in points} == {"1f1b", "interleaved"}
    assert {(p["attention"], p["ffn"]) for p in points} >= {("sp", "ep"), ("tp", "tp")}


def test_search_sorted_top(tmp_path) -> None:
    """The fastest layouts come first, at most ``top`` of them, and the CSV is resumable. In this process: two
    job processes are test_search_cli's (--jobs 2) and test_search_fast's (the same rows on one or two)."""
    out = tmp_path / "search.csv"
    rows = search("mixtral-8x7b", 16, jobs=1, top=5, out=out, progress=lambda _: None, **NARROW)
    assert 1 <= len(rows) <= 5
    speeds = [float(r["tokens_per_s"]) for r in rows]
    assert speeds == sorted(speeds, reverse=True)
    messages: list[str] = []
    assert search("mixtral-8x7b", 16, top=5, out=out, progress=messages.append, **NARROW) == rows
    assert messages[-1].startswith("sweep: 0 points")  # nothing simulated again: kept rows, or skipped ones


def test_search_cli(capsys) -> None:
    """The command prints a header and ten ranked rows with memory."""
    assert (
        main(
            [
                "search",
                "--model",
                "mixtral-8x7b",
                "--gpus",
                "16",
                "--global-batch",
                "16",
                "--seq-len",
                "2048",
                "--jobs",
                "2",
                "--space",
                "narrow",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.strip().splitlines()
    ranked = [line for line in lines if line.split()[0].isdigit()]
    assert "mem GiB" in lines[1] and len(ranked) == 10 and lines[2] == ranked[0]


def test_stages_that_fit_are_the_valid_divisors_within_hbm() -> None:
    """One helper finds the pipeline depths for search, layouts-ep and scaleup-domain."""
    from experiments.search.space import Job, divisors

    model, layout = model_preset("paper-352b"), layout_preset("megascale-moe")
    job = Job(240, 8, 720, 8192, cluster_preset("h800", 240).gpu.hbm_bytes)
    depths = job.stages_that_fit(model, layout)
    assert 15 in depths and set(depths) <= set(divisors(model.num_layers))
    assert job.fits(model, layout.with_(pp=7)) is None  # 7 does not divide 240 / 8
    assert job.fits(model, layout.with_(pp=1)) is False
    assert job._replace(hbm_bytes=1.0).stages_that_fit(model, layout) == []


def test_search_takes_a_model_file(tmp_path) -> None:
    from workloads.inputs.yaml_files import model_to_yaml

    path = tmp_path / "mix.yaml"
    path.write_text(model_to_yaml(model_preset("mixtral-8x7b")))
    assert candidates(str(path), 16, **NARROW)[0] == [
        {**p, "model": str(path)} for p in candidates("mixtral-8x7b", 16, **NARROW)[0]
    ]
    rows = search(str(path), 16, top=1, progress=lambda _: None, **NARROW)
    assert len(rows) == 1 and not rows[0]["error"]


def test_search_states_assumptions_explains_columns_and_prints_the_winner(tmp_path, capsys) -> None:
    """The batch and sequence assumed, a legend of the columns, the winner as a command and a layout file
    that runs to the same step time."""
    layout = tmp_path / "best.yaml"
    argv = ["search", "--model", "mixtral-8x7b", "--gpus", "16", "--global-batch", "16", "--seq-len", "2048"]
    argv += ["--space", "narrow"]
    assert main([*argv, "--top", "3", "--write-layout", str(layout), "--quiet"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    words = " ".join(out.split())
    assert "global batch 16 sequences of 2048 tokens" in out.splitlines()[0]
    assert "columns: attn = attention split" in words and "mem GiB = peak memory per GPU" in words
    command = out.strip().splitlines()[-1]
    assert command.startswith("fastest: moesim run --model mixtral-8x7b --cluster h800 --gpus 16 --global-batch 16")
    assert command.endswith(f"--layout {layout}") and "base: megascale-moe" in layout.read_text()
    assert "[" not in captured.err  # no per-point lines on the screen
    best = float(re.search(r"\s(\d+\.\d{3})\s", out.splitlines()[2]).group(1))  # the first row's step time
    assert main(["run", *command.split()[3:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] == pytest.approx(best, abs=1e-3)
