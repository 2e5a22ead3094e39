"""Every constant of the cost models names where it comes from (the constants table of REPRODUCTION.md)."""

from __future__ import annotations

from dataclasses import fields

from simulator.costs.calibration import DEFAULT_CALIBRATION, SOURCES, Calibration
from simulator.costs.gemm_efficiency import HOPPER_GEMM_TABLE


def test_every_constant_has_a_source_and_only_the_residual_is_fitted():
    names = [f.name for f in fields(Calibration)]
    assert sorted(SOURCES) == sorted(names)
    assert all(SOURCES[name] for name in names)
    assert [name for name in names if SOURCES[name].startswith("FITTED")] == ["compute_residual"]


def test_rows_show_the_gemm_table_by_its_source():
    rows = {name: (value, source) for name, value, source in DEFAULT_CALIBRATION.as_rows()}
    # by default each GPU generation's own table (simulator/costs/generations.py), sources of both listed
    assert rows["gemm_efficiency"][0] == "published tables by GPU generation"
    assert "Hopper: DeepGEMM" in rows["gemm_efficiency"][1] and "Blackwell: MAMF" in rows["gemm_efficiency"][1]
    fixed = {name: value for name, value, _ in DEFAULT_CALIBRATION.with_(gemm_efficiency=HOPPER_GEMM_TABLE).as_rows()}
    assert fixed["gemm_efficiency"] == "table of published points"
    assert rows["compute_residual"][0] == DEFAULT_CALIBRATION.compute_residual
