"""experiments/common/error_band.py: the band of the validated runs most alike, worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.common import error_band
from experiments.common.error_band import ErrorBand, KnownError, Mechanisms, band_for, load_known
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

ALLTOALL = Mechanisms(True, False, "alltoall", "hopper", "bf16", "1f1b")


def _runs(mechanisms: Mechanisms, errors: list[float], prefix: str) -> list[KnownError]:
    return [KnownError(f"{prefix}{i}", mechanisms, e) for i, e in enumerate(errors)]


def _megascale_runs(folder: Path) -> Path:
    """A validation table of MIN_ALIKE (9) MegaScale-MoE-like runs (errors -0.1 to 0.1): a band of its own, no
    relaxing."""
    table = folder / "validation.csv"
    rows = [
        f"r{i},{e},False,True,fused-a2a,hopper,bf16,1f1b"
        for i, e in enumerate([0.0, 0.1, -0.1, 0.05, 0.02, 0.03, 0.04, -0.05, 0.06])
    ]
    table.write_text("case,error,fitted,moe,dispatcher,generation,precision,schedule\n" + "\n".join(rows) + "\n")
    return table


def test_the_band_is_the_range_of_the_runs_alike_in_every_mechanism(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(error_band, "MIN_ALIKE", 3)
    known = _runs(ALLTOALL, [0.1, 0.3, 0.2], "a") + _runs(ALLTOALL._replace(precision="fp8"), [-0.5], "f")
    band = band_for(ALLTOALL, known)
    assert (band.low, band.high, band.cases) == (0.1, 0.3, 3) and band.matched == Mechanisms._fields
    assert band.step_range_s(10.0) == pytest.approx((11.0, 13.0))  # measured step time ~ predicted x (1 + error)
    assert band.to_json() == {
        "low": 0.1,
        "high": 0.3,
        "cases": 3,
        "out_of_corpus": 0,
        "basis": band.basis,
        "note": "",
    }


def test_out_of_corpus_runs_count_for_their_own_generation_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blackwell rows simulated out of the corpus (moesim reproduce blackwell) join the band of a prediction on their
    generation, beside the corpus's runs, and no other's: a Hopper prediction keeps the corpus's band."""
    monkeypatch.setattr(error_band, "MIN_ALIKE", 3)
    gb300 = ALLTOALL._replace(generation="blackwell-ultra")
    corpus = _runs(ALLTOALL, [0.1, 0.2, 0.3], "h")
    outside = [KnownError(f"g{i}", gb300, e, in_corpus=False) for i, e in enumerate([-0.2, -0.15, -0.1])]
    band = band_for(gb300, corpus + outside)
    assert (band.low, band.high, band.cases, band.outside) == (-0.2, -0.1, 3, 3) and band.matched == Mechanisms._fields
    assert (
        band.basis
        == "3 published runs alike in " + ", ".join(Mechanisms._fields) + " (moesim validate; 3 out of the corpus)"
    )
    assert "the band counts 3 published blackwell-ultra runs simulated out of the corpus" in band.note
    hopper = band_for(ALLTOALL, corpus + outside)
    assert (hopper.low, hopper.high, hopper.outside, hopper.note) == (0.1, 0.3, 0, "")
    blackwell = band_for(ALLTOALL._replace(generation="blackwell"), corpus + outside)  # GB300's rows are not GB200's
    assert (blackwell.low, blackwell.high, blackwell.outside) == (0.1, 0.3, 0)
    assert "the band's runs are of other GPU generations" in blackwell.note


def test_too_few_alike_drops_the_least_telling_mechanism_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(error_band, "MIN_ALIKE", 3)
    known = (
        _runs(ALLTOALL, [0.1], "a")
        + _runs(ALLTOALL._replace(schedule="interleaved"), [0.4], "s")  # differs in the schedule only
        + _runs(ALLTOALL._replace(precision="fp8"), [0.2], "p")  # in the precision
        + _runs(ALLTOALL._replace(dispatcher="deepep"), [-0.3, -0.2, -0.1], "d")
    )
    band = band_for(ALLTOALL, known)  # schedule dropped: 2 runs; precision too: 3
    assert (band.low, band.high, band.cases) == (0.1, 0.4, 3)
    assert band.matched == ("moe", "hybrid", "dispatcher", "generation")
    everyone = band_for(Mechanisms(False, False, "dense", "ampere", "bf16", "1f1b"), known)
    assert (everyone.cases, everyone.matched) == (6, ())  # nothing alike: every validated run
    assert band_for(ALLTOALL, known[:1], exclude="a0") is None


def test_a_run_is_left_out_of_its_own_band(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(error_band, "MIN_ALIKE", 2)
    known = _runs(ALLTOALL, [0.1, 0.2, 0.9], "a")
    assert band_for(ALLTOALL, known, exclude="a2").high == 0.2


def test_mechanisms_of_presets() -> None:
    megascale = error_band.mechanisms_of(model_preset("paper-352b"), layout_preset("megascale-moe"), "h800")
    assert megascale == Mechanisms(True, False, "fused-a2a", "hopper", "bf16", "1f1b")
    megatron = error_band.mechanisms_of(model_preset("paper-352b"), layout_preset("megatron-lm"), "a100")
    assert (megatron.dispatcher, megatron.generation) == ("tp-ffn", "ampere")


def test_known_errors_come_from_the_validation_table(tmp_path: Path) -> None:
    table = tmp_path / "validation.csv"
    header = "case,error,fitted,moe,dispatcher,generation,precision,schedule\n"
    rows = ["x,0.1,False,True,alltoall,hopper,bf16,1f1b", "fit,0.0,True,True,alltoall,hopper,bf16,1f1b"]
    rows.append("oom,,False,,,,,")
    table.write_text(header + "\n".join(rows) + "\n")
    assert load_known(table) == [KnownError("x", ALLTOALL, 0.1)]  # the fitted and the not-run rows left out
    assert load_known(tmp_path / "none.csv") == []
    blackwell = tmp_path / "blackwell-check.csv"
    blackwell.write_text(header + "b,-0.2,,True,alltoall,blackwell,bf16,1f1b\n")
    gb200 = ALLTOALL._replace(generation="blackwell")
    assert load_known(table, blackwell) == [KnownError("x", ALLTOALL, 0.1), KnownError("b", gb200, -0.2, False)]


def test_describe_says_the_range_and_its_basis() -> None:
    band = ErrorBand(-0.1, 0.05, 9, ("moe", "dispatcher"))
    expected = "likely 18-21 s per step, from 9 published runs alike in moe, dispatcher (moesim validate)"
    assert band.describe(20.0) == expected


def test_band_of_a_prediction_and_its_json(tmp_path: Path) -> None:
    table = _megascale_runs(tmp_path)
    band = error_band.band_of(model_preset("paper-352b"), layout_preset("megascale-moe"), "h800", table)
    assert (band.low, band.high, band.cases) == (-0.1, 0.1, 9) and band.matched == Mechanisms._fields
    assert error_band.band_json(band)["cases"] == 9
    missing = error_band.band_of(model_preset("paper-352b"), layout_preset("megascale-moe"), "h800", tmp_path / "x")
    none = error_band.band_json(missing)
    assert none["cases"] == 0 and none["low"] is None and "moesim validate" in none["basis"]


def test_run_prints_and_returns_its_band(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.cli.main import main

    table = _megascale_runs(tmp_path)
    monkeypatch.setattr(error_band, "VALIDATION_CSV", table)
    assert main(["run", "--gpus", "240", "--global-batch", "60", "--json"]) == 0
    blob = json.loads(capsys.readouterr().out)
    band = blob["expected_error"]
    assert (band["low"], band["high"], band["cases"]) == (-0.1, 0.1, 9) and "alike in moe, hybrid, dispatcher" in band[
        "basis"
    ]
    assert main(["run", "--gpus", "240", "--global-batch", "60"]) == 0
    step_s = blob["step_time_s"]
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  expected"))
    assert f"likely {step_s * 0.9:.3g}-{step_s * 1.1:.3g} s per step, from 9 published runs" in line


def test_compare_rows_carry_their_band(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments.cli.main import main

    table = _megascale_runs(tmp_path)
    monkeypatch.setattr(error_band, "VALIDATION_CSV", table)
    out = tmp_path / "c.csv"
    # a point that cannot run (240 GPUs at PP 8): the row is still written, with the band of its layout
    main(["compare", "--model", "paper-352b", "--layouts", "megascale-moe", "--gpus", "240", "--sweep", "pp=8",
          "--out", str(out)])  # fmt: skip
    header, row = out.read_text().splitlines()[:2]
    assert header.endswith("expected_low,expected_high,expected_cases")
    assert row.rsplit(",", 3)[-3:] == ["-0.1", "0.1", "9"]
