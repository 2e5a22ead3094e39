"""Bad command-line values, contradictions and output paths: one line, exit 2, before any simulation."""

from __future__ import annotations

import pytest

from experiments.cli.main import main
from experiments.common.paths import atomic_path, write_text
from topologies.errors import ConfigError

SMALL_RUN = ["run", "--gpus", "240", "--global-batch", "30"]


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one stderr line of a refused command (exit 2, no usage, nothing on stdout)."""
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's errors exit (status 2) before main returns
        status = exit_.code
    assert status == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("moesim: error: "), captured.err
    assert captured.out == ""
    return lines[0].removeprefix("moesim: error: ")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--gpus", "1.5"], "gpus: must be an integer, got '1.5'"),
        (["run", "--nic-gbps", "nan"], "nic_gbps: must be a finite number, got 'nan'"),
        (["run", "--engine", "x"], "engine: invalid choice"),
        (["run", "--cluster", ""], "cluster: must not be empty"),
        (["run", "--layout", " "], "layout: must not be empty"),
        (["run", "--megatron-args", ""], "megatron_args: must not be empty"),
        (["compare", "--model", ""], "model: must not be empty"),
        (["run", "--trace-micro-batches", "-3"], "trace_micro_batches: must be >= 1, got -3"),
        (["run", "--trace-stages", "-1", "--trace", "t.json"], "trace_stages: expected comma-separated stage"),
        (["run", "--trace", ""], "trace: must name a file ending in .json"),
        (["run", "--routing", "uniform", "--zipf", "2"], "routing: --routing uniform contradicts --zipf 2"),
        (["run", "--micro-batch", "2", "--set", "micro_batch=4"], "micro_batch: --set micro_batch=4 contradicts"),
        (["run", "--set", "pp=10", "--set", "pp=12"], "pp: --set pp=12 contradicts --set pp=10"),
        (["search", "--gpus", "8", "--global-batch", "0"], "global_batch: must be >= 1, got 0"),
        (["search", "--gpus", "8", "--top", "-1"], "top: must be >= 1, got -1"),
        (["sweep", "x.yaml", "--jobs", "-5"], "jobs: must be >= 1, got -5"),
        (["compare", "--gpus", ""], "gpus: give at least one value"),
        (["compare", "--layouts", ""], "layouts: give at least one value"),
        (["compare", "--out", "x.txt"], "out: 'x.txt': must end in .csv"),
        (["reproduce", "table3", "--out", "README.md"], "out: 'README.md' is a file"),
        (["search", "--gpus", "8", "--out", "tests"], "out: 'tests': must end in .csv"),
    ],
)
def test_refused_in_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert _error(capsys, argv).startswith(message)


def test_output_paths_checked_before_simulating(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory, a file used as a folder, an unwritable place: refused before the (slow) simulation."""
    (tmp_path / "file").write_text("")
    (tmp_path / "d.json").mkdir()
    assert "is a directory" in _error(capsys, [*SMALL_RUN, "--trace", str(tmp_path / "d.json")])
    assert "is not a directory" in _error(capsys, [*SMALL_RUN, "--plot", str(tmp_path / "file" / "p.png")])
    assert "cannot write into '/proc'" in _error(capsys, [*SMALL_RUN, "--trace", "/proc/t.json"])
    assert "must end in .png or .pdf or .svg" in _error(capsys, [*SMALL_RUN, "--plot", str(tmp_path / "p.txt")])


def test_plot_without_extension_names_the_file_written(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SMALL_RUN, "--plot", str(tmp_path / "noext")]) == 0
    assert f"moesim: wrote {tmp_path / 'noext.png'}" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["noext.png"]


def test_failed_write_leaves_no_truncated_file(tmp_path) -> None:
    """A write that fails midway keeps the old file whole and leaves no temporary beside it."""
    target = tmp_path / "out.csv"
    write_text(target, "old\n")
    with pytest.raises(RuntimeError), atomic_path(target) as temporary:
        temporary.write_text("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_empty_cluster_name_is_an_error() -> None:
    from simulator.report.clusters import load_cluster

    with pytest.raises(ConfigError, match="unknown preset ''"):
        load_cluster("", 8)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--model", "x" + "9" * 5000],
        ["run", "--model", "9" * 5000 + ".json"],
        ["run", "--set", "pp=" + "9" * 5000],
        ["run", "--straggler", "1:" + "9" * 5000],
        ["run", "--cluster", "9" * 5000],
    ],
)
def test_huge_values_are_not_quoted_whole(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """A 5,000-character value: one line of a few hundred characters, no traceback (file name too long)."""
    assert len(_error(capsys, argv)) < 400
