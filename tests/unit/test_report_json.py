"""The JSON report: memory per stage broken down, and useful MFU beside MFU."""

from __future__ import annotations

import json

import pytest

from experiments.cli.main import main
from simulator.report.simulate import simulate
from workloads.inputs.yaml_files import load_layout

TERMS = {"params", "grads", "optimizer", "activations", "buffers", "total"}


def test_json_has_memory_per_stage_and_useful_mfu(capsys) -> None:
    assert main(["run", "--global-batch", "30", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    stages = report["memory_gib"]
    assert len(stages) == report["pp"] == 15 and all(set(stage) == TERMS for stage in stages)
    assert max(stage["total"] for stage in stages) == pytest.approx(report["peak_memory_gib"])
    assert all(sum(v for k, v in s.items() if k != "total") == pytest.approx(s["total"]) for s in stages)
    # Capacity factor 1.25: the expert GEMMs run 1.25 x the routed copies; attention and dense GEMMs do not.
    assert report["mfu"] * 0.8 < report["useful_mfu"] < report["mfu"]


def test_useful_mfu_equals_mfu_without_padding() -> None:
    for layout in (
        load_layout("megascale-moe").with_(capacity_factor=1.0),
        load_layout("megascale-moe").with_(dropless=True),
    ):
        report = simulate("paper-352b", layout, 240, global_batch=30)
        assert report.useful_mfu == pytest.approx(report.mfu)


def test_dropped_copies_are_not_useful() -> None:
    skewed = load_layout("megascale-moe").with_(routing="zipf", zipf_exponent=1.5, capacity_factor=1.0)
    report = simulate("paper-352b", skewed, 240, global_batch=30)
    assert report.useful_mfu < 0.9 * report.mfu


def test_table_rows_stay_flat() -> None:
    row = simulate("paper-352b", "megascale-moe", 240, global_batch=30).to_row()
    assert "memory_gib" not in row and "useful_mfu" in row
