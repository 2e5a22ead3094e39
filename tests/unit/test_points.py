"""experiments.search.points: one classifier of settings and one runner for compare, sweep and search."""

from __future__ import annotations

import pytest

from experiments.search.points import Point, make_point, run_point
from simulator.report.simulate import simulate
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.specs.layouts import layout_preset

SMALL = {"global_batch": 16, "seq_len": 2048}  # mixtral-8x7b on 16 GPUs: a fast point


def test_make_point_sends_each_setting_to_its_target() -> None:
    point = make_point(
        "paper-352b",
        "megascale-moe",
        240,
        {"seq_len": 4096, "nic_bandwidth_Bps": 5e10, "pp": 10, "zipf": 1, "global_batch": 60},
        global_batch=30,
    )
    assert point == Point(
        "paper-352b",
        "megascale-moe",
        240,
        "h800",
        {"global_batch": 60, "seq_len": 4096},  # the swept global batch wins over the one beside it
        {"pp": 10, "routing": "zipf", "zipf_exponent": 1.0},
        {"nic_bandwidth_Bps": 5e10},
    )
    with pytest.raises(ConfigError, match="bogus"):
        make_point("paper-352b", "megascale-moe", 240, {"bogus": 1})


def test_run_point_is_the_flat_report_or_only_the_error() -> None:
    point = make_point("mixtral-8x7b", "megascale-moe", 16, {"pp": 2}, **SMALL)
    row = run_point(point)
    layout = layout_preset("megascale-moe").with_(pp=2)
    report = simulate("mixtral-8x7b", layout, cluster=cluster_preset("h800", 16), **SMALL)
    expected = {**report.to_row(), "error": ""}
    assert row.keys() == expected.keys()
    assert {k: v for k, v in row.items() if k != "sim_wall_s"} == {
        k: v for k, v in expected.items() if k != "sim_wall_s"
    }
    bad = make_point("mixtral-8x7b", "megascale-moe", 12, {}, **SMALL)
    assert run_point(bad) == {"error": "gpus: 12 must be a multiple of the 8 GPUs a job uses per domain; try 8 or 16"}
