"""The run command's routing and EP flags."""

from __future__ import annotations

import json

from experiments.cli.main import main


def test_run_with_cross_node_ep_and_skew(capsys) -> None:
    argv = [
        "run",
        "--gpus",
        "240",
        "--global-batch",
        "30",
        "--ep",
        "16",
        "--ep-max-nodes",
        "2",
        "--zipf",
        "1.1",
        "--seed",
        "5",
        "--dropless",
        "--json",
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["step_time_s"] > 0 and report["dp"] == 2
    assert main(argv) == 0 and json.loads(capsys.readouterr().out)["step_time_s"] == report["step_time_s"]


def test_bad_ep_is_a_one_line_error(capsys) -> None:
    assert main(["run", "--ep", "12", "--global-batch", "30"]) == 2
    assert "layout.ep" in capsys.readouterr().err
