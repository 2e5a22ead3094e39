"""Errors that say what to do: the nearest GPU counts, layout fields and options that would fit."""

from __future__ import annotations

import pytest

from experiments.cli import main


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1  # one line
    return err


def test_gpus_that_do_not_divide_name_counts_and_pp(capsys) -> None:
    err = _error(capsys, ["run", "--model", "mixtral-8x22b", "--gpus", "128"])
    assert "not a multiple of intra_size x pp = 120; try --gpus 120 or 240, or --set pp=8 (or 4, 2)" in err


def test_suggested_pp_runs(capsys) -> None:
    assert main(["run", "--model", "mixtral-8x22b", "--gpus", "128", "--cluster", "h100", "--set", "pp=8"]) == 0


def test_batch_hint(capsys) -> None:
    assert "try --global-batch 30 or 32" in _error(capsys, ["run", "--global-batch", "31"])


def test_layers_hint(capsys) -> None:
    err = _error(capsys, ["run", "--model", "mixtral-8x22b", "--gpus", "120"])
    assert "56 layers not divisible by pp x virtual_stages = 15; try --set uneven_pp=true or --set pp=1" in err


@pytest.mark.parametrize(
    ("flags", "term", "option"),
    [
        (["--set", "pp=10", "--set", "schedule=dualpipe"], "grads", "--set zero_stage=2"),
        (
            ["--set", "recompute=none", "--micro-batch", "2", "--global-batch", "60"],
            "activations",
            "--set recompute=sar",
        ),
    ],
)
def test_oom_names_biggest_term_and_option(capsys, flags: list[str], term: str, option: str) -> None:
    err = _error(capsys, ["run", "--gpus", "240", *flags])
    assert f"the biggest term is {term} (" in err and f"try {option}" in err and "--allow-oom" in err
