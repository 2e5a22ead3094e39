"""Every constant of the cost models names where it comes from (the constants table of REPRODUCTION.md)."""

from __future__ import annotations

from dataclasses import fields

from simulator.costs.calibration import DEFAULT_CALIBRATION, SOURCES, Calibration


def test_every_constant_has_a_source_and_only_the_residual_is_fitted():
    names = [f.name for f in fields(Calibration)]
    assert sorted(SOURCES) == sorted(names)
    assert all(SOURCES[name] for name in names)
    assert [name for name in names if SOURCES[name].startswith("FITTED")] == ["compute_residual"]


def test_rows_show_the_gemm_table_by_its_source():
    rows = {name: (value, source) for name, value, source in DEFAULT_CALIBRATION.as_rows()}
    assert rows["gemm_efficiency"] == ("table of published points", DEFAULT_CALIBRATION.gemm_efficiency.source)
    assert rows["compute_residual"][0] == DEFAULT_CALIBRATION.compute_residual
