"""The ``moesim`` command line: JSON structure, exit codes and one-line errors (no values checked)."""

from __future__ import annotations

import json

import pytest

from experiments.cli.main import main

# 240 GPUs = 8 (SP/EP) x 15 (PP) x 2 (DP); 30 sequences -> 15 micro-batches per pipeline: fast.
SMALL_RUN = ["run", "--gpus", "240", "--global-batch", "30"]


def test_run_json_structure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SMALL_RUN, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    report = json.loads(out)
    for key in (
        "step_time_s",
        "tokens_per_s",
        "mfu",
        "bubble_fraction",
        "exposed_comm_s",
        "peak_memory_gib",
        "sim_wall_s",
    ):
        assert key in report, key
    assert set(report["exposed_comm_s"]) == {"tp", "sp", "ep", "pp", "dp"}
    assert all(isinstance(v, float) and v >= 0.0 for v in report["exposed_comm_s"].values())
    assert (report["gpus"], report["dp"], report["pp"], report["micro_batches"]) == (240, 2, 15, 15)
    assert report["step_time_s"] > 0 and report["tokens_per_s"] > 0 and report["peak_memory_gib"] > 0
    assert 0.0 < report["mfu"] < 1.0 and 0.0 <= report["bubble_fraction"] < 1.0
    # tokens/s is the step's tokens (30 x 8192) over the step time
    assert report["tokens_per_s"] == pytest.approx(30 * 8192 / report["step_time_s"], rel=1e-12)


def test_run_json_megatron_layout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SMALL_RUN, "--layout", "megatron-lm", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["layout"] == "megatron-lm"
    assert set(report["exposed_comm_s"]) == {"tp", "sp", "ep", "pp", "dp"}


def test_run_text_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(SMALL_RUN) == 0
    out = capsys.readouterr().out
    assert "step time" in out and "throughput" in out and "bubble" in out


@pytest.mark.parametrize(
    "argv,field",
    [
        (["run", "--model", "no-such-model"], "model"),
        (["run", "--layout", "no-such-layout"], "layout"),
        (["run", "--gpus", "100"], "gpus"),  # not a multiple of 8
        (["run", "--gpus", "250"], "gpus"),  # not a multiple of 8
        (["run", "--gpus", "128"], "gpus"),  # a multiple of 8 but not of 8 x PP 15
        (["run", "--cluster", "no-such-cluster"], "cluster"),
        (["run", "--global-batch", "31"], "global_batch"),  # not divisible by DP 2
    ],
)
def test_bad_input_one_line_exit_2(argv: list[str], field: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("moesim: error: ")
    assert field in lines[0]


def test_set_overrides_layout_fields(capsys) -> None:
    assert (
        main(["run", "--gpus", "240", "--global-batch", "30", "--set", "pp=10", "--set", "recompute=full", "--json"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["pp"] == 10 and report["dp"] == 3
    assert main(["run", "--set", "pp=x"]) == 2
    assert capsys.readouterr().err.strip() == "moesim: error: --set pp: must be an integer, got 'x'"
    assert main(["run", "--set", "lora_rnk=8"]) == 2  # a misspelt field: the nearest names, not all eighty
    assert capsys.readouterr().err.strip().endswith("a layout field (lora_rank), got 'lora_rnk=8'")
