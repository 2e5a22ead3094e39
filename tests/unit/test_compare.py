"""``moesim compare`` (experiments.search.compare): axis resolution, the CSV it writes, errors."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.cli.main import main
from experiments.search.compare import compare_row
from experiments.search.points import CLUSTER, LAYOUT, SIMULATE, make_point, target_of
from topologies.errors import ConfigError

# 240 GPUs = 8 x 15 (PP) x 2 (DP); 30 sequences -> 15 micro-batches per pipeline: fast.
FAST = ["--gpus", "240", "--global-batch", "30"]


def simulate_point(model: str, layout: str, gpus: int, settings: dict) -> dict:
    """The compare row of one point at the fast global batch."""
    return compare_row(make_point(model, layout, gpus, settings, global_batch=30))


def test_axes_resolve_to_simulate_cluster_or_layout() -> None:
    assert target_of("seq_len") == SIMULATE
    assert target_of("nic_bandwidth_Bps") == CLUSTER
    assert target_of("domain_gpus") == CLUSTER
    assert target_of("pp") == LAYOUT and target_of("schedule") == LAYOUT
    assert target_of("zipf") == LAYOUT  # an alias for routing="zipf" + zipf_exponent
    with pytest.raises(ConfigError, match="bogus"):
        target_of("bogus")


def test_point_that_cannot_run_is_a_row_with_its_error() -> None:
    row = simulate_point("paper-352b", "megascale-moe", 240, {"pp": 12})
    assert "intra_size x pp" in row["error"] and row["tokens_per_s"] != row["tokens_per_s"]  # NaN


def test_compare_nic_and_layouts_csv(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """2 layouts x 2 NIC bandwidths x 1 GPU count = 4 rows; a faster NIC never slows a step down."""
    out = tmp_path / "x.csv"
    assert (
        main(["compare", *FAST, "--layouts", "megascale-moe,megatron-lm", "--nic-gbps", "25,100", "--out", str(out)])
        == 0
    )
    frame = pd.read_csv(out)
    assert len(frame) == 4 and (tmp_path / "x.png").exists()
    assert sorted(frame.nic_gbps.unique()) == [25.0, 100.0]
    for _layout, group in frame.groupby("layout"):
        slow, fast = group.sort_values("nic_gbps").tokens_per_s
        assert fast >= slow
    assert "wrote" in capsys.readouterr().out


def test_compare_scaleup_and_generic_sweep(tmp_path) -> None:
    out = tmp_path / "y.csv"
    assert main(["compare", *FAST, "--scaleup", "8,16", "--sweep", "seq_len=4096", "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame.scaleup) == [8, 16] and list(frame.seq_len) == [4096, 4096]
    assert frame.error.isna().all()


def test_compare_zipf_sweeps_routing_skew(tmp_path) -> None:
    """--zipf 0,1,2: 0 is the paper's uniform routing; skew under capacity 1.25 drops copies, never slows."""
    out = tmp_path / "z.csv"
    assert main(["compare", *FAST, "--zipf", "0,1,2", "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame.zipf) == [0, 1, 2] and frame.error.isna().all() and (tmp_path / "z.png").exists()
    uniform = simulate_point("paper-352b", "megascale-moe", 240, {})
    assert frame.tokens_per_s[0] == pytest.approx(uniform["tokens_per_s"], rel=1e-5)  # CSV keeps 6 digits
    dropless = simulate_point("paper-352b", "megascale-moe", 240, {"zipf": 2, "dropless": True})
    assert dropless["tokens_per_s"] < frame.tokens_per_s[2]  # the busiest GPU paces dropless expert GEMMs


def test_compare_zipf_bad_value_is_a_one_line_error(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", *FAST, "--zipf", "high", "--out", str(tmp_path / "z.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "zipf" in err


def test_compare_sweeps_global_batch(tmp_path) -> None:
    """--sweep global_batch overrides --global-batch (it used to be passed twice to simulate())."""
    out = tmp_path / "g.csv"
    assert main(["compare", *FAST, "--sweep", "global_batch=30,60", "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame.global_batch) == [30, 60] and frame.error.isna().all()
    assert frame.tokens_per_s[1] > frame.tokens_per_s[0]  # more micro-batches, smaller bubble


@pytest.mark.parametrize(
    "flags, field",
    [
        (["--sweep", "calibration=1"], "calibration"),
        (["--sweep", "faults=1"], "faults"),
        (["--sweep", "memoize=false"], "memoize"),
        (["--sweep", "gpus=8"], "gpus"),
        (["--sweep", "pp=x"], "pp"),
        (["--sweep", "pp=1.5"], "pp"),
        (["--sweep", "dropless=yes"], "dropless"),
        (["--sweep", "nic_efficiency=abc"], "nic_efficiency"),
        (["--sweep", "pp=,"], "pp"),
        (["--sweep", "pp"], "sweep"),
        (["--nic-gbps", "abc"], "nic_gbps"),
        (["--scaleup", "8,x"], "scaleup"),
        (["--layouts", "missing.yaml"], "layout"),
        (["--model", "missing.yaml"], "model"),
    ],
)
def test_compare_bad_key_or_value_is_a_one_line_error(tmp_path, capsys, flags: list[str], field: str) -> None:
    assert main(["compare", *FAST, *flags, "--out", str(tmp_path / "e.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"moesim: error: {field}")
    assert not (tmp_path / "e.csv").exists()


def test_axis_checks_python_values() -> None:
    from experiments.search.compare import axis

    assert axis("nic_efficiency", [1]).values == (1.0,)  # an int widens to a float field
    with pytest.raises(ConfigError, match="pp"):
        axis("pp", [True])  # a bool is not an integer
    with pytest.raises(ConfigError, match="schedule"):
        axis("schedule", [3])


def test_compare_takes_layout_and_model_files(tmp_path) -> None:
    from workloads.inputs.yaml_files import layout_to_yaml, model_to_yaml
    from workloads.specs.layouts import layout_preset
    from workloads.specs.models import model_preset

    (tmp_path / "m.yaml").write_text(model_to_yaml(model_preset("paper-352b")))
    (tmp_path / "l.yaml").write_text(layout_to_yaml(layout_preset("megascale-moe")))
    out = tmp_path / "f.csv"
    args = ["compare", *FAST, "--model", str(tmp_path / "m.yaml"), "--layouts", str(tmp_path / "l.yaml")]
    assert main([*args, "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    preset = simulate_point("paper-352b", "megascale-moe", 240, {})
    assert frame.error.isna().all() and frame.tokens_per_s[0] == pytest.approx(preset["tokens_per_s"], rel=1e-5)


def test_compare_writes_to_the_current_folder_by_default(tmp_path, monkeypatch) -> None:
    """Without --out, compare.csv and compare.png land in the current folder, never in the tracked results/."""
    monkeypatch.chdir(tmp_path)
    assert main(["compare", *FAST, "--sweep", "pp=15"]) == 0
    assert (tmp_path / "compare.csv").exists() and (tmp_path / "compare.png").exists()


def test_compare_plot_is_against_the_swept_variable_with_facets(tmp_path) -> None:
    """Two swept variables: x is the first, one panel per value of the second; errored points are NaN."""
    from experiments.search.compare_plot import plot

    frame = main_frame(tmp_path, ["--sweep", "pp=15,12", "--sweep", "schedule=1f1b,interleaved"])
    drawn = plot(frame, ["pp", "schedule"], tmp_path / "p.png", "t")
    assert list(drawn) == ["schedule=1f1b", "schedule=interleaved"]
    (points,) = drawn["schedule=1f1b"].values()
    assert [x for x, _ in points] == [15, 12] and points[0][1] > 0 and points[1][1] != points[1][1]


def main_frame(tmp_path, flags: list[str]) -> pd.DataFrame:
    assert main(["compare", *FAST, *flags, "--out", str(tmp_path / "c.csv")]) == 0
    return pd.read_csv(tmp_path / "c.csv")


def test_docs_compare_example_runs_without_errors(tmp_path) -> None:
    """The --sweep example of docs/getting-started.md, as written there, runs every row (it used to error in 3 of 4)."""
    import re
    import shlex
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "getting-started.md").read_text()
    command = re.search(r"`moesim compare (--gpus \d+ --sweep pp=[\d,]+ --sweep schedule=[\w,]+)`", page)
    assert command, "the compare --sweep example of docs/getting-started.md"
    assert main(["compare", *shlex.split(command.group(1)), "--out", str(tmp_path / "docs.csv")]) == 0
    frame = pd.read_csv(tmp_path / "docs.csv")
    assert len(frame) == 4 and frame.error.isna().all() and (frame.tokens_per_s > 0).all()
