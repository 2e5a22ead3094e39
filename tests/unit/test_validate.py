"""``moesim validate``: the strict case loader, the JSON shape, the sign of the error, the MAPE by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from experiments.cli.main import main
from experiments.paper.reproduce import REPRODUCTIONS
from experiments.validation import corpus as validation_cases
from experiments.validation import tables, validate
from experiments.validation.case_result import CaseResult
from experiments.validation.pairs import pairs
from simulator.costs.calibration import DEFAULT_CALIBRATION, UNFITTED_CALIBRATION
from simulator.report.simulate import simulate
from tests.unit.test_config import TINY
from topologies.errors import ConfigError

TINY_MODEL = {key: value for key, value in TINY.items() if key != "name"}  # the tiny model of test_config


def tiny_case(tmp_path: Path, **changes: object) -> dict:
    """A case on a 4-layer model (16 GPUs, PP 2, batch 16 x 32,768: sequences long enough that the derate scales
    most of its step, not the host's launches); ``changes`` replace top-level keys."""
    model = tmp_path / "tiny-model.yaml"
    model.write_text(yaml.safe_dump(TINY_MODEL))
    case = {
        "model": str(model),
        "layout": {"base": "megascale-moe", "pp": 2},
        "cluster": "h800",
        "gpus": 16,
        "global_batch": 16,
        "seq_len": 32768,
        "measured": {"tokens_per_s_per_gpu": 1000, "model_tflops_per_gpu": 100},
        "source": {"document": "a test", "release": "v0"},
    }
    case.update(changes)
    return {k: v for k, v in case.items() if v is not None}


def write(tmp_path: Path, case: dict, name: str = "tiny.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(case))
    return path


def test_the_loader_reads_a_tiny_case(tmp_path: Path) -> None:
    case = validation_cases.load_case(write(tmp_path, tiny_case(tmp_path, notes="one note")))
    assert (case.name, case.model.name, case.cluster, case.gpus, case.global_batch, case.seq_len) == (
        "tiny",
        "tiny-model",
        "h800",
        16,
        16,
        32768,
    )
    assert (case.layout.pp, case.layout.attention, case.layout.name) == (2, "sp", "tiny")
    assert (case.measured_tokens_per_s_per_gpu, case.measured_model_tflops_per_gpu) == (1000.0, 100.0)
    assert (case.source_label, case.notes, case.fitted, case.megatron_args) == ("a test v0", ("one note",), False, "")
    # the whole job's tokens/s is divided by the GPUs
    total = validation_cases.load_case(write(tmp_path, tiny_case(tmp_path, measured={"tokens_per_s": 32000})))
    assert total.measured_tokens_per_s_per_gpu == 2000.0
    # Megatron flags given as a list are one command line
    flags = tiny_case(tmp_path, megatron_args=["--tensor-model-parallel-size 2", "--bf16"])
    assert validation_cases.load_case(write(tmp_path, flags)).megatron_args == "--tensor-model-parallel-size 2 --bf16"


BAD = [
    ({"colour": "red"}, "tiny.yaml:colour: unknown key"),
    ({"gpus": "16"}, "tiny.yaml:gpus: must be a positive integer"),
    ({"gpus": 0}, "tiny.yaml:gpus: must be a positive integer"),
    ({"fitted": "yes"}, "tiny.yaml:fitted: must be true or false"),
    ({"cluster": None}, "tiny.yaml:cluster: missing required key"),
    ({"cluster": "h9000"}, "tiny.yaml:cluster: unknown preset"),
    ({"model": "nope"}, "tiny.yaml:model: unknown preset"),
    ({"layout": {"base": "megascale-moe", "pp": 2, "colour": 1}}, "tiny.yaml:layout.colour: unknown key"),
    ({"layout": {"base": "megascale-moe", "pp": "2"}}, "tiny.yaml:layout.pp: must be an integer"),
    ({"layout": 7}, "tiny.yaml:layout: must be a preset name"),
    ({"layout": None}, "tiny.yaml:layout: give the job"),
    ({"megatron_args": 5}, "tiny.yaml:megatron_args: must be Megatron-LM flags"),
    ({"measured": {"tokens_per_s_per_gpu": -1}}, "tiny.yaml:measured.tokens_per_s_per_gpu: must be a finite number"),
    ({"measured": {"tokens_per_s_per_gpu": "8826"}}, "tiny.yaml:measured.tokens_per_s_per_gpu: must be a finite"),
    ({"measured": {"tokens_per_s_per_gpu": 1, "flops": 2}}, "tiny.yaml:measured.flops: unknown key"),
    ({"measured": {"model_tflops_per_gpu": 2}}, "tiny.yaml:measured.tokens_per_s_per_gpu: give exactly one"),
    ({"measured": {"tokens_per_s": 1, "tokens_per_s_per_gpu": 1}}, "tiny.yaml:measured.tokens_per_s_per_gpu"),
    ({"measured": [1]}, "tiny.yaml:measured: must be a mapping"),
    (
        {"measured": {"tokens_per_s_per_gpu": 1, "peak_allocated_gb": 60, "peak_allocated_gib": 56}},
        "tiny.yaml:measured.peak_allocated_gb: give at most one",
    ),
    ({"source": {"release": "x"}}, "tiny.yaml:source.document: missing required key"),
    ({"recipe": {"tp": {"a": 1}}}, "tiny.yaml:recipe.tp: must be a scalar or a list of scalars"),
    ({"other_releases": {"release": "x"}}, "tiny.yaml:other_releases: must be a list"),
    ({"other_releases": [{"release": "x"}]}, "tiny.yaml:other_releases[0].tokens_per_s_per_gpu: missing required"),
    (
        {"other_releases": [{"release": "x", "tokens_per_s_per_gpu": 1, "same": 1}]},
        "tiny.yaml:other_releases[0].same: unknown",
    ),
]


@pytest.mark.parametrize("change, message", BAD)
def test_bad_case_files_are_one_line_naming_the_field(tmp_path: Path, change: dict, message: str) -> None:
    path = write(tmp_path, tiny_case(tmp_path, **change))
    with pytest.raises(ConfigError) as error:
        validation_cases.load_case(path)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("text, message", [("- 1\n- 2\n", "must hold a YAML mapping"), ("a: [1\n", "not valid YAML")])
def test_unreadable_case_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        validation_cases.load_case(path)


def test_a_bad_case_file_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, tiny_case(tmp_path, gpus="16"))
    assert main(["validate", "--cases", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["moesim: error: tiny.yaml:gpus: must be a positive integer, got '16'"]


def test_each_case_also_runs_at_residual_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Beside its prediction, a case is simulated with the one fitted constant at 1 (the published kernel
    speeds alone): faster kernels, more tokens/s; the CSV, the table and REPRODUCTION.md show its error."""
    case = validation_cases.load_case(write(tmp_path, tiny_case(tmp_path)))
    probe = validate.run_case(case)
    job = validate.case_job(case)
    unfitted = simulate(job.model, job.layout, 16, calibration=UNFITTED_CALIBRATION, **validate.case_settings(case))
    assert UNFITTED_CALIBRATION.compute_residual == 1.0 > DEFAULT_CALIBRATION.compute_residual
    assert probe.unfitted_tokens_per_s_per_gpu == unfitted.tokens_per_s_per_gpu > probe.predicted_tokens_per_s_per_gpu
    assert probe.unfitted_error == pytest.approx(unfitted.tokens_per_s_per_gpu / 1000 - 1)
    cases = tmp_path / "cases"
    cases.mkdir()
    write(cases, tiny_case(tmp_path), "tiny.yaml")
    out = tmp_path / "out"
    assert main(["validate", "--cases", str(cases), "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "at residual 1" in table.splitlines()[0] and f"{probe.unfitted_error:+.1%}" in table.splitlines()[1]
    assert "at 1, the published kernel speeds at the sustained clock alone: MAPE" in table
    row = pd.read_csv(out / "validation.csv").iloc[0]
    assert row.error_at_residual_1 == pytest.approx(probe.unfitted_error, rel=1e-5)
    assert "| at residual 1 |" in (out / "REPRODUCTION.md").read_text()


def test_json_shape_and_the_sign_of_the_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    probe = validate.run_case(validation_cases.load_case(write(tmp_path, tiny_case(tmp_path))))
    predicted = probe.predicted_tokens_per_s_per_gpu
    assert probe.ran and predicted > 0
    cases = tmp_path / "cases"
    cases.mkdir()
    # measured 1/1.25 of the prediction: the prediction is 25% high, error +0.25
    # its source also prints the peak allocated memory, in GB of 1e9 bytes: the simulated peak is 10% under it
    peak_gb = probe.report.peak_memory_gib * 2**30 / 1e9 / 0.9
    measured = {"tokens_per_s_per_gpu": predicted / 1.25, "peak_allocated_gb": peak_gb}
    write(cases, tiny_case(tmp_path, measured=measured), "high.yaml")
    write(cases, tiny_case(tmp_path, measured={"tokens_per_s_per_gpu": predicted / 0.8}), "low.yaml")
    write(cases, tiny_case(tmp_path, gpus=24), "broken.yaml")  # 24 GPUs do not divide into intra 8 x PP 2
    out = tmp_path / "out"
    assert main(["validate", "--json", "--cases", str(cases), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    derates = {"effective_derate", "derate_dense", "derate_moe"}
    mapes = {"mape", "mape_external", "mape_paper", "group_mape"}
    assert set(report) == {"cases", "not_run", "fitted", "pairs", "release_pairs", "memory"} | mapes | derates
    assert [row["case"] for row in report["memory"]["cases"]] == ["high"]  # the one case with a published peak
    assert report["memory"]["cases"][0]["error"] == pytest.approx(-0.1)
    assert report["memory"]["mape"] == pytest.approx(0.1)
    broken, high, low = report["cases"]
    for row in (high, low):
        tokens = {"measured_tokens_per_s_per_gpu", "predicted_tokens_per_s_per_gpu"}
        assert set(row) == {"case", "error", "implied_derate", "memory_verdict"} | tokens
        assert row["memory_verdict"] in ("fits", "may not fit")
    section = (out / "REPRODUCTION.md").read_text()
    assert "Memory (simulator/memory/verdict.py): 2 of the 2 cases simulated fit within 80% of HBM" in section
    assert "Peak memory per GPU against the allocator's published peak" in section and "| high |" in section
    assert (high["case"], low["case"]) == ("high", "low")
    assert high["predicted_tokens_per_s_per_gpu"] == pytest.approx(predicted)
    assert high["error"] == pytest.approx(0.25)
    assert low["error"] == pytest.approx(-0.2)
    assert report["mape"] == pytest.approx((0.25 + 0.2) / 2)
    assert report["mape_external"] == pytest.approx((0.25 + 0.2) / 2) and report["mape_paper"] is None  # none from it
    # predicted 25% high: the case implies a lower derate than the fitted one; 20% low, a higher one
    assert high["implied_derate"] < report["effective_derate"] < low["implied_derate"]
    # a case that cannot run is a row with its message, left out of the MAPE and listed
    assert (broken["predicted_tokens_per_s_per_gpu"], broken["error"]) == (None, None)
    assert broken["message"].startswith("gpus: 24")
    assert report["not_run"] == ["broken"]
    assert "validate: [3/3] low" in captured.err  # progress goes to stderr
    for name in ("validation.csv", "validation.png", "REPRODUCTION.md"):
        assert (out / name).is_file()
    assert "<!-- validation -->" in (out / "REPRODUCTION.md").read_text()


def result(
    error: float | None, fitted: bool = False, name: str = "x", measured: float = 1000.0, **fields: str
) -> validate.CaseResult:
    """A CaseResult whose prediction is (1 + error) x its measured tokens/s per GPU (None: not run)."""
    case = validation_cases.Case(
        name=name,
        model=None,
        cluster="h800",
        gpus=8,
        global_batch=8,
        seq_len=1024,
        layout=None,
        megatron_args="",
        measured_tokens_per_s_per_gpu=measured,
        measured_model_tflops_per_gpu=None,
        source={"document": "d"},
        fitted=fitted,
        **fields,
    )
    predicted = None if error is None else measured * (1 + error)
    return validate.CaseResult(case, predicted, "" if predicted else "memory: too big")


def test_mape_by_hand() -> None:
    results = [result(0.1), result(-0.2), result(0.5, fitted=True), result(None)]
    assert [r.error for r in results[:3]] == [pytest.approx(0.1), pytest.approx(-0.2), pytest.approx(0.5)]
    assert [r.in_mape for r in results] == [True, True, False, False]
    assert tables.mape(results) == pytest.approx((0.1 + 0.2) / 2)  # fitted and not-run cases left out
    assert math.isnan(tables.mape([result(None), result(0.3, fitted=True)]))
    assert tables.to_json([result(None)])["mape"] is None


def test_matched_pairs_by_hand() -> None:
    """A pair's speedup is the case's tokens/s over its baseline's, measured and simulated: measured 1,500 over
    1,000 = 1.5x; simulated 1,500 x 1.2 over 1,000 x 0.9 = 2.0x, 33.3% more gain than measured. Matched runs
    keep their own MAPE, out of the headline one."""
    base = result(-0.1, name="base", group="matched")
    faster = result(0.2, name="faster", measured=1500.0, group="matched", baseline="base", change="a flag")
    corpus = result(0.05, name="corpus", baseline="base", change="FP8")
    unrun = result(None, name="unrun", baseline="base", change="OOM")
    found = pairs([base, faster, corpus, unrun])
    assert [(p.case, p.baseline, p.change) for p in found] == [
        ("faster", "base", "a flag"),
        ("corpus", "base", "FP8"),
        ("unrun", "base", "OOM"),
    ]
    assert found[0].measured_speedup == pytest.approx(1.5)
    assert found[0].predicted_speedup == pytest.approx(2.0)
    assert found[0].error == pytest.approx(2.0 / 1.5 - 1)
    assert found[1].predicted_speedup == pytest.approx(1.05 / 0.9) and found[2].error is None
    assert tables.mape([base, faster, corpus]) == pytest.approx(0.05)
    assert tables.mape([base, faster, corpus], "matched") == pytest.approx((0.1 + 0.2) / 2)
    assert pairs([faster]) == []  # its baseline not among the results: no pair
    printed = tables.table([base, faster, corpus])
    assert "matched runs: MAPE 15.0% over 2 cases" in printed and "faster / base" in printed
    assert "1.500x     2.000x   +33.3%" in printed
    blob = tables.to_json([base, faster, corpus])
    assert blob["mape"] == pytest.approx(0.05) and blob["group_mape"] == {"matched": pytest.approx(0.15)}
    assert blob["pairs"][0]["predicted_speedup"] == pytest.approx(2.0)


def test_a_baseline_must_be_a_case_of_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "cases"
    folder.mkdir()
    write(folder, tiny_case(tmp_path, group="matched"), "a.yaml")
    write(folder, tiny_case(tmp_path, baseline={"case": "a", "change": "PP 4"}), "b.yaml")
    assert validation_cases.load_cases(folder)[1].baseline == "a"
    assert validation_cases.load_cases(folder)[0].group == "matched"
    write(folder, tiny_case(tmp_path, baseline={"case": "nope", "change": "x"}), "c.yaml")
    with pytest.raises(ConfigError, match="c.yaml:baseline.case: 'nope' is not a case of"):
        validation_cases.load_cases(folder)
    write(folder, tiny_case(tmp_path, baseline={"case": "c", "change": "x"}), "c.yaml")
    with pytest.raises(ConfigError, match="c.yaml:baseline.case: a case cannot be its own baseline"):
        validation_cases.load_cases(folder)
    write(folder, tiny_case(tmp_path, baseline={"case": "a"}), "c.yaml")
    with pytest.raises(ConfigError, match="c.yaml:baseline.change: missing required key"):
        validation_cases.load_cases(folder)


def test_the_shipped_corpus_loads(tmp_path: Path) -> None:
    corpus = validation_cases.load_cases()
    names = [case.name for case in corpus]
    assert len(names) == len(set(names)) == 73
    nemo = [c for c in corpus if c.name.startswith("nemo-")]  # NeMo 24.07's dense H100 table
    assert len(nemo) == 11 and all(c.megatron_args and c.cluster == "h100" and c.source.get("commit") for c in nemo)
    assert sorted(c.name for c in corpus if c.fitted) == ["paper-t3-megascale-moe-0240", "paper-t5-4-sp-ep-inter-intra"]
    bridge = [c for c in corpus if c.name.startswith("bridge-")]
    assert len(bridge) == 27 and all(c.megatron_args and c.cluster == "h100" for c in bridge)
    assert [c.layout.peft for c in bridge if c.layout is not None and c.layout.peft != "none"] == ["lora"]
    assert all(c.source.get("commit") for c in bridge)
    assert sum(c.group == "matched" for c in corpus) == 7
    assert all(c.measured_model_tflops_per_gpu for c in bridge if c.group == validation_cases.CORPUS)
    recipes = [c for c in corpus if c.name.startswith("mlm-recipes-")]  # Megatron-LM PR #5728's H100 rows
    assert len(recipes) == 3 and all(c.megatron_args and c.cluster == "h100" for c in recipes)
    assert all(c.source.get("commit") and c.measured_model_tflops_per_gpu and c.derivation for c in recipes)
    sc21 = [c for c in corpus if c.name.startswith("mlm-sc21-")]  # the SC21 paper's Table 1, its launch scripts
    assert len(sc21) == 10 and all(c.cluster == "a100" and c.model.name == "megatron-flags" for c in sc21)
    assert all("--activations-checkpoint-method uniform" in c.megatron_args and c.derivation for c in sc21)
    automodel = [c for c in corpus if c.name.startswith("automodel-")]  # NeMo AutoModel's table: a group of its own
    assert len(automodel) == 7 and all(c.group == "automodel" and c.megatron_args for c in automodel)
    assert all(
        dict(c.layout_set)["main_params_dtype"] == "none" for c in automodel
    )  # its BF16 weights, stepped in place
    gated = [c for c in automodel if c.model.num_experts]  # its fake balanced gate; the dense Llama 3.1 70B has none
    assert len(gated) == 6 and all(c.layout.routing == "consecutive" for c in gated)
    with pytest.raises(ConfigError, match="unknown case"):
        validation_cases.load_cases(names=["nope"])


def test_a_release_pair_names_each_other_and_disagrees_by_more_than_20_percent(tmp_path: Path) -> None:
    """release_pair: two releases at the same printed settings, kept both; the loader checks the pair, the report
    gives both and the measured and simulated ratios (experiments/validation/release_pairs.py)."""
    folder = tmp_path / "cases"
    folder.mkdir()
    slow = {"tokens_per_s_per_gpu": 1000}
    write(folder, tiny_case(tmp_path, measured=slow, release_pair={"case": "b", "note": "why"}), "a.yaml")
    fast = {"tokens_per_s_per_gpu": 1250}
    write(folder, tiny_case(tmp_path, measured=fast, release_pair={"case": "a", "note": "why"}), "b.yaml")
    a, b = validation_cases.load_cases(folder)
    assert (a.release_pair, b.release_pair, a.release_pair_note) == ("b", "a", "why")
    ran = [CaseResult(a, 1050.0, ""), CaseResult(b, 1260.0, "")]
    assert "release pair: a (v0, 1,000 tokens/s/GPU) and b (v0, 1,250): measured 1.25x, simulated 1.20x" in (
        tables.table(ran)
    )
    assert tables.to_json(ran)["release_pairs"] == [
        {"cases": ["a", "b"], "releases": ["v0", "v0"], "measured_ratio": 1.25, "predicted_ratio": pytest.approx(1.2)}
    ]
    assert "more than 20% apart (both kept as cases):\n\n- a (v0" in tables.markdown(ran)
    write(
        folder,
        tiny_case(tmp_path, measured={"tokens_per_s_per_gpu": 1200}, release_pair={"case": "a", "note": "x"}),
        "b.yaml",
    )
    with pytest.raises(ConfigError, match="the two releases are 20% apart, not more than 20%"):
        validation_cases.load_cases(folder)
    write(folder, tiny_case(tmp_path, measured=fast), "b.yaml")
    with pytest.raises(ConfigError, match="a.yaml:release_pair.case: 'b' must name 'a' back"):
        validation_cases.load_cases(folder)
    write(folder, tiny_case(tmp_path, release_pair={"case": "c", "note": "x"}), "b.yaml")
    with pytest.raises(ConfigError, match="'b' must name 'a' back|'c' is not another case"):
        validation_cases.load_cases(folder)


def test_case_names_are_unique(tmp_path: Path) -> None:
    folder = tmp_path / "cases"
    folder.mkdir()
    write(folder, tiny_case(tmp_path), "a.yaml")
    write(folder, tiny_case(tmp_path, name="a"), "b.yaml")
    with pytest.raises(ConfigError, match="b.yaml:name: 'a' is also the name of a.yaml"):
        validation_cases.load_cases(folder)


def test_the_corpus_is_package_data_and_a_reproduction() -> None:
    pyproject = (validation_cases.ROOT / "pyproject.toml").read_text()  # tomllib is Python >= 3.11
    folder = validation_cases.CASES_DIR.relative_to(validation_cases.ROOT / "experiments").as_posix()
    assert f'experiments = ["{folder}/*.yaml"]' in pyproject.split("[tool.setuptools.package-data]")[1]
    assert REPRODUCTIONS["validation"] is validate.run


@pytest.mark.benchmark
def test_the_whole_corpus_runs(tmp_path: Path) -> None:
    results = validate.run_cases(validation_cases.load_cases(), say=lambda line: None)
    assert all(r.ran or r.message for r in results)
    assert math.isfinite(tables.mape(results))
    section = validate.write_outputs(results, tmp_path)
    assert section.count("\n| ") == len(results) + 1  # header + one row per case


def test_an_out_of_memory_case_is_a_row_simulated_anyway(tmp_path: Path) -> None:
    oom = tiny_case(tmp_path, model="mixtral-8x7b", layout={"base": "megascale-moe", "pp": 1}, gpus=8, global_batch=8)
    r = validate.run_case(validation_cases.load_case(write(tmp_path, oom)))
    assert not r.ran and not r.in_mape and r.message.startswith("memory: ")
    assert r.ignoring_memory is not None and r.ignoring_memory > 0  # the step simulated with allow_oom
    section = validate.write_outputs([r], tmp_path)
    assert "Could not run (1, left out of the MAPE)" in section and "Simulated anyway (allow_oom)" in section
    row = pd.read_csv(tmp_path / "validation.csv").iloc[0]
    assert row.predicted_ignoring_memory == pytest.approx(r.ignoring_memory, rel=1e-5)
    assert math.isnan(row.predicted_tokens_per_s_per_gpu)


def test_breakdown_says_where_a_miss_goes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--breakdown prints, after the table, each miss's busiest-stage breakdown at both calibrations (the text
    REPRODUCTION.md gives it); a case within 10% gets none."""
    argv = ["validate", "--case", "bridge-llama-3.1-70b-h100-0064", "--case", "paper-t3-megatron-lm-0480"]
    assert main(argv + ["--breakdown", "--out", str(tmp_path), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "Where one micro-batch" in line]
    assert len(lines) == 1 and lines[0].startswith("bridge-llama-3.1-70b-h100-0064 (")
    assert "; at residual 1 (stage " in lines[0] and "the lightest stage" in lines[0]
    assert lines[0].split(": Where one micro-batch")[1] in (tmp_path / "REPRODUCTION.md").read_text()


def test_a_subset_leaves_the_corpus_table_alone(tmp_path: Path, monkeypatch, capsys: pytest.CaptureFixture) -> None:
    """`moesim validate --case X` without --out writes nothing: results/validation.csv is the whole corpus's table,
    which `moesim run`'s error band reads (a one-case table there would band every prediction by one run)."""
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "--case", "paper-t3-megatron-lm-0480", "--jobs", "1"]) == 0
    assert not (tmp_path / "results").exists() and "results/ left as it is" in capsys.readouterr().err
    assert main(["validate", "--case", "paper-t3-megatron-lm-0480", "--jobs", "1", "--out", "mine"]) == 0
    assert (tmp_path / "mine" / "validation.csv").read_text().count("\n") == 2  # the header and the case


def test_a_case_s_set_goes_over_its_megatron_arguments() -> None:
    """``set:`` says what no Megatron flag can (AutoModel's BF16 weights with no master copy): applied after the
    arguments, whose defaults would otherwise win; its fields are checked when the case loads."""
    path = validation_cases.CASES_DIR / "automodel-qwen3-30b-a3b-h100-0008.yaml"
    data = yaml.safe_load(path.read_text())
    case = validation_cases.case_from_dict(data, "c", "c.yaml")
    assert validate.case_job(case).layout.main_params_dtype == "none"
    plain = validation_cases.case_from_dict({k: v for k, v in data.items() if k != "set"}, "c", "c.yaml")
    assert validate.case_job(plain).layout.main_params_dtype == "fp32"  # Megatron-LM's default
    with pytest.raises(ConfigError, match="c.yaml"):
        validation_cases.case_from_dict({**data, "set": {"main_params_dtype": "bf8"}}, "c", "c.yaml")
    with pytest.raises(ConfigError, match="c.yaml:layout.nope: unknown key"):  # one line, not a TypeError
        validation_cases.case_from_dict({**data, "set": {"nope": 1}}, "c", "c.yaml")
