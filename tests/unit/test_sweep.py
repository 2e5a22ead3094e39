"""Tests for ``moesim sweep``: local pool, resume, errors as rows, and the dask path."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from experiments.cli.main import main
from experiments.search.sweep import load_sweep, point_id, run_sweep
from topologies.errors import ConfigError
from workloads.inputs.yaml_files import model_to_yaml
from workloads.specs.models import MODEL_PRESETS

SWEEP = """
model: paper-352b
layout: [megascale-moe, megatron-lm]
gpus: [240, 120, 100]
global_batch: 30
nic_gbps: 50
output: out.csv
"""


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _write(tmp_path: Path, text: str = SWEEP) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


def test_local_pool_two_jobs(tmp_path: Path) -> None:
    """Six points on two processes: one row each; the invalid GPU count is an error row."""
    assert main(["sweep", str(_write(tmp_path)), "--jobs", "2"]) == 0
    rows = _rows(tmp_path / "out.csv")
    assert len(rows) == 6
    errors = [r for r in rows if r["error"]]
    assert len(errors) == 2 and all(r["gpus"] == "100" and "gpus" in r["error"] for r in errors)
    ok = [r for r in rows if not r["error"]]
    assert all(float(r["step_time_s"]) > 0 and r["nic_gbps"] == "50" for r in ok)
    assert {"exposed_ep_s", "mfu", "point_id"} <= set(rows[0])


def test_nic_bandwidth_changes_result(tmp_path: Path) -> None:
    """nic_gbps reaches ClusterSpec: slower NICs, slower step."""
    points, output = load_sweep(
        _write(
            tmp_path,
            SWEEP.replace("nic_gbps: 50", "nic_gbps: [10, 50]")
            .replace("gpus: [240, 120, 100]", "gpus: 240")
            .replace("[megascale-moe, megatron-lm]", "megascale-moe"),
        )
    )
    run_sweep(points, output, progress=lambda _: None)
    times = {r["nic_gbps"]: float(r["step_time_s"]) for r in _rows(output)}
    assert times["10"] > times["50"]


def test_resume_runs_only_missing_points(tmp_path: Path) -> None:
    """A partial table (as after Ctrl-C, last row cut off) is completed without rerunning finished points."""
    points, output = load_sweep(_write(tmp_path))
    run_sweep(points[:3], output, progress=lambda _: None)
    lines = output.read_text().splitlines(keepends=True)
    output.write_text("".join(lines[:3]) + lines[3][:-30])  # header + 2 rows + a third torn inside point_id
    messages: list[str] = []
    run_sweep(points, output, jobs=2, progress=messages.append)
    assert messages[0].startswith("sweep: 6 points, 2 already in") and "running 4" in messages[0]
    assert sum(m.startswith("[") for m in messages) == 4
    ids = [r["point_id"] for r in _rows(output)]
    assert sorted(ids) == sorted(point_id(p) for p in points)


def test_bad_sweep_file(tmp_path: Path, capsys) -> None:
    """Unknown keys and missing output are one-line errors with status 2."""
    assert main(["sweep", str(_write(tmp_path, "gpus: 240\nbogus: 1\noutput: x.csv\n"))]) == 2
    assert "sweep.bogus" in capsys.readouterr().err
    assert main(["sweep", str(_write(tmp_path, "gpus: 240\n"))]) == 2
    assert "sweep.output" in capsys.readouterr().err


def test_layout_fields_in_grid(tmp_path: Path) -> None:
    """Layout fields (here pp) can be swept too."""
    points, output = load_sweep(_write(tmp_path, "gpus: 240\nglobal_batch: 30\npp: [5, 15]\noutput: o.csv\n"))
    run_sweep(points, output, progress=lambda _: None)
    assert sorted(r["pp"] for r in _rows(output)) == ["15", "5"]


def test_dask_scheduler(tmp_path: Path) -> None:
    """The dask.distributed path on an in-process LocalCluster on loopback, by Client and by address."""
    distributed = pytest.importorskip("dask.distributed")
    points, output = load_sweep(_write(tmp_path))
    with distributed.LocalCluster(
        processes=False, n_workers=1, threads_per_worker=2, protocol="tcp://", host="127.0.0.1", dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            run_sweep(points, output, scheduler=client, progress=lambda _: None)
        run_sweep(points, tmp_path / "by_address.csv", scheduler=cluster.scheduler_address, progress=lambda _: None)
    assert len(_rows(output)) == 6
    assert len(_rows(tmp_path / "by_address.csv")) == 6


def test_unreadable_sweep_file_is_one_line_error(tmp_path, capsys) -> None:
    from experiments.cli.main import main

    assert main(["sweep", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moesim: error: sweep: cannot read")


@pytest.mark.parametrize(
    "line, field",
    [
        ('gpus: [240, "x"]', "sweep.gpus"),
        ("gpus: [240, true]", "sweep.gpus"),  # int(True) used to be taken as 1
        ("gpus: 240.0", "sweep.gpus"),
        ("gpus: []", "sweep.gpus"),
        ("gpus: 240\nnic_gbps: fast", "sweep.nic_gbps"),
        ("gpus: 240\npp: [5, x]", "sweep.pp"),
        ("gpus: 240\nlayout: [megascale-moe, 3]", "sweep.layout"),
        ("gpus: 240\nglobal_batch: {a: 1}", "sweep.global_batch"),
    ],
)
def test_bad_point_value_is_a_one_line_error_before_running(tmp_path: Path, capsys, line: str, field: str) -> None:
    """A value of the wrong type stops the sweep before any point runs, naming the key."""
    assert main(["sweep", str(_write(tmp_path, f"{line}\noutput: out.csv\n"))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"moesim: error: {field}:")
    assert not (tmp_path / "out.csv").exists()


def test_run_point_with_a_bad_value_is_an_error_row() -> None:
    """Points built in Python (not from a file) are checked too: an error row, not a crash."""
    from experiments.search.sweep import sweep_row

    row = sweep_row({"gpus": True, "global_batch": 30})
    assert row["error"].startswith("gpus:")


def test_layout_and_model_files_relative_to_sweep_file(tmp_path: Path) -> None:
    """model/layout may be .yaml files; relative paths are relative to the sweep file, like output."""
    from workloads.inputs.yaml_files import layout_to_yaml, model_to_yaml
    from workloads.specs.layouts import layout_preset
    from workloads.specs.models import model_preset

    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "m.yaml").write_text(model_to_yaml(model_preset("paper-352b")))
    (folder / "l.yaml").write_text(layout_to_yaml(layout_preset("megascale-moe").with_(pp=30)))
    path = folder / "sweep.yaml"
    path.write_text("model: m.yaml\nlayout: [l.yaml, megascale-moe]\ngpus: 240\nglobal_batch: 30\noutput: o.csv\n")
    points, output = load_sweep(path)
    run_sweep(points, output, progress=lambda _: None)
    rows = _rows(output)
    assert len(rows) == 2 and not any(r["error"] for r in rows)
    by_layout = {Path(r["layout"]).name: r for r in rows}
    assert by_layout["l.yaml"]["pp"] == "30" and by_layout["megascale-moe"]["pp"] == "15"


def test_cp_and_etp_exposed_columns(tmp_path: Path) -> None:
    """The CSV carries exposed_cp_s and exposed_etp_s, as run --json and compare do."""
    text = "model: mixtral-8x7b\ngpus: 16\nglobal_batch: 8\nseq_len: 4096\nintra_size: 4\npp: 2\n"
    points, output = load_sweep(_write(tmp_path, text + "cp: [1, 2]\netp: 2\noutput: out.csv\n"))
    run_sweep(points, output, progress=lambda _: None)
    rows = {r["cp"]: r for r in _rows(output)}
    assert not rows["2"]["error"] and float(rows["2"]["exposed_cp_s"]) > 0 and float(rows["2"]["exposed_etp_s"]) > 0
    assert rows["1"]["exposed_cp_s"] == ""  # not used: blank, as in run --json where the key is absent


PARQUET = (
    "model: mixtral-8x7b\ngpus: 16\nglobal_batch: 8\nseq_len: 4096\nintra_size: 4\npp: 2\netp: 2\noutput: out.parquet\n"
)


def test_parquet_without_pyarrow_is_refused_before_running(tmp_path: Path, capsys, monkeypatch) -> None:
    """No pyarrow: one line naming the extra, status 2, nothing simulated, no 'success' line."""
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)  # import pyarrow raises ImportError
    assert main(["sweep", str(_write(tmp_path, PARQUET))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "moesim[parquet]" in err and "->" not in err
    assert not list(tmp_path.glob("out*"))


def test_parquet_output(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    assert main(["sweep", str(_write(tmp_path, PARQUET))]) == 0
    frame = pd.read_parquet(tmp_path / "out.parquet")
    assert len(frame) == 1 and frame.step_time_s.iloc[0] > 0


def test_sweep_table_bookkeeping(tmp_path: Path) -> None:
    """Repeated points run once; error rows run again on resume; an edited model file reruns its points."""
    model = tmp_path / "m.yaml"
    model.write_text(model_to_yaml(MODEL_PRESETS["mixtral-8x7b"].with_(name="m")))
    sweep = _write(
        tmp_path, "model: m.yaml\ngpus: [16, 16, 12]\nglobal_batch: 16\nseq_len: 1024\npp: 2\noutput: o.csv\n"
    )
    points, output = load_sweep(sweep)
    messages: list[str] = []
    run_sweep(points, output, progress=messages.append)
    assert messages[0].startswith("sweep: 2 points, 0 already")
    assert sorted(bool(r["error"]) for r in _rows(output)) == [False, True]  # 12 GPUs do not divide
    messages.clear()
    run_sweep(points, output, progress=messages.append)
    assert messages[0].startswith("sweep: 2 points, 1 already")  # the error row runs again, replacing itself
    assert len(_rows(output)) == 2
    model.write_text(model.read_text().replace("num_layers: 32", "num_layers: 16"))
    messages.clear()
    run_sweep(points, output, progress=messages.append)
    assert messages[0].startswith("sweep: 2 points, 0 already")
    assert len(_rows(output)) == 2


def test_second_writer_refused(tmp_path: Path) -> None:
    import fcntl

    points, output = load_sweep(_write(tmp_path))
    with (tmp_path / f".{output.name}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ConfigError, match="is being written by another sweep"):
            run_sweep(points, output, progress=lambda _: None)


@pytest.mark.parametrize(("address", "says"), [("bogus", "expected an address"), ("tcp://127.0.0.1:1", "within 1 s")])
def test_bad_scheduler_is_one_line_quickly(tmp_path: Path, address: str, says: str, monkeypatch) -> None:
    """A malformed address is refused before dask is asked; an unreachable one after the connect timeout
    (what `says` checks: the Client was given it), not after dask's default 30 s."""
    from experiments.common import parallel

    pytest.importorskip("dask.distributed")
    monkeypatch.setattr(parallel, "CONNECT_TIMEOUT_S", 1)  # the default (3 s) is what the CLI waits
    points, output = load_sweep(_write(tmp_path))
    with pytest.raises(ConfigError, match=f"^scheduler: .*{says}"):
        run_sweep(points, output, scheduler=address, progress=lambda _: None)
    assert not output.exists()


def test_nic_gbps_takes_unit_strings_as_the_cli_does(tmp_path: Path, capsys) -> None:
    """nic_gbps: 400Gb/s is 50 GB/s (the point is the one of a bare 50), 50GB/s is 50; a bare number stays GB/s;
    a malformed string is a one-line error naming the key."""
    for text, gbps in (("400Gb/s", 50.0), ("[50GB/s, 800Gbps]", None), ("50", 50)):
        points, _ = load_sweep(_write(tmp_path, SWEEP.replace("nic_gbps: 50", f"nic_gbps: {text}")))
        if gbps is None:
            assert sorted({p["nic_gbps"] for p in points}) == [50.0, 100.0]
        else:
            assert {p["nic_gbps"] for p in points} == {gbps}
    assert main(["sweep", str(_write(tmp_path, SWEEP.replace("nic_gbps: 50", "nic_gbps: 400 Gbit")))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sweep.nic_gbps" in err[0] and "400Gb/s" in err[0]
