"""Documented bounds (workloads/specs/limits.py), YAML bombs, overflowing values and simulate()'s argument types."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from experiments.cli.main import main
from experiments.search.sweep import load_sweep
from simulator.engine.faults import Faults
from simulator.report.simulate import simulate
from topologies.errors import ConfigError
from workloads.inputs.yaml_files import parse_yaml, read_yaml
from workloads.specs.limits import limit

LAUGHS = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)
)


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err.removeprefix("moesim: error: ")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--global-batch", "7200000"], "global_batch: micro-batches per pipeline"),
        (["run", "--set", "capacity_factor=1e308"], "layout.capacity_factor: capacity factor 1e+308 exceeds"),
        (["run", "--straggler", "17:1e308"], "straggler: GPU 17: FACTOR 1e+308 exceeds the limit"),
        (["run", "--degrade", "nvlink:9:1e308"], "degrade: GPU 9: FACTOR 1e+308 exceeds the limit"),
        (["run", "--degrade", "nvlink:9:1e5", "--degrade", "nvlink:9:1e5"], "degrade: nvlink:9: the product"),
    ],
)
def test_refused_before_simulating(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    error = _one_line(capsys, argv)
    assert error.startswith(message)
    assert "MOESIM_MAX_" in error or "product" in error


def test_limit_is_raised_by_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert limit("micro_batches") == 16_384
    monkeypatch.setenv("MOESIM_MAX_MICRO_BATCHES", "100000")
    assert limit("micro_batches") == 100_000
    monkeypatch.setenv("MOESIM_MAX_MICRO_BATCHES", "lots")
    with pytest.raises(ConfigError, match="MOESIM_MAX_MICRO_BATCHES: must be a positive number"):
        limit("micro_batches")


def test_report_never_holds_infinity(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """With the factor limit raised, a step that overflows is a ConfigError naming the field, not "Infinity"."""
    monkeypatch.setenv("MOESIM_MAX_FAULT_FACTOR", "1e308")
    error = _one_line(capsys, ["run", "--straggler", "3:1e308", "--json"])
    assert error.startswith("step_time_s: the simulated step gives inf")


def test_yaml_bombs_are_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match="nodes with aliases expanded .* exceeds the limit"):
        parse_yaml("model", LAUGHS)
    with pytest.raises(ConfigError, match="nesting depth 65 exceeds the limit of 64"):
        parse_yaml("model", "a: " + "[" * 70 + "]" * 70)
    with pytest.raises(ConfigError, match="refers to itself through an alias"):
        parse_yaml("model", "a: &a [1, *a]")
    big = tmp_path / "big.yaml"
    big.write_text("name: " + "x" * (2 << 20))
    with pytest.raises(ConfigError, match="size in bytes 2,097,158 exceeds the limit of 1,048,576"):
        read_yaml("model", big)
    with pytest.raises(ConfigError, match=r"^model.num_layers: must be an integer, got 'y{79}\.\.\.$"):
        from workloads.inputs.yaml_files import model_from_dict

        model_from_dict({"num_layers": "y" * 100_000})


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_yaml_link_to_a_device_is_not_read(tmp_path) -> None:
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="not a regular file"):
        read_yaml("model", link)


def test_sweep_grid_bound(tmp_path) -> None:
    lines = [f"{key}: {list(range(1, 11))}" for key in ("gpus", "seq_len", "global_batch", "micro_batch", "pp")]
    path = tmp_path / "sweep.yaml"
    path.write_text("\n".join([*lines, "nic_gbps: [1, 2]", "output: out.csv"]))
    with pytest.raises(ConfigError, match="sweep: grid points 200,000 exceeds the limit of 100,000"):
        load_sweep(path)


@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"faults": "17:1.2"}, "faults: must be a Faults"),
        ({"cluster": {"gpu": "h800"}}, "cluster: must be a ClusterSpec"),
        ({"calibration": None}, "calibration: must be a Calibration"),
        ({"allow_oom": "no"}, "allow_oom: must be True or False"),
        ({"memoize": "no"}, "memoize: must be True or False"),
        ({"global_batch": 30.0}, "global_batch: must be an integer"),
        ({"engine": 3}, "engine: must be one of folded, unfolded"),
        ({"probes": "trace"}, "probes: must be an iterable of Probe"),
    ],
)
def test_simulate_argument_types(keywords: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        simulate("paper-352b", "megascale-moe", 240, **{"global_batch": 30, **keywords})


def test_simulate_takes_numpy_integers() -> None:
    plain = simulate("paper-352b", "megascale-moe", 240, global_batch=30)
    numpy = simulate("paper-352b", "megascale-moe", np.int64(240), global_batch=np.int32(30), seq_len=np.int64(8192))
    assert json.dumps(numpy.to_dict())  # plain ints: JSON-serialisable
    assert (numpy.gpus, numpy.step_time_s) == (plain.gpus, plain.step_time_s)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: Faults(stragglers=[(17,)]), "straggler: each entry is a tuple such as"),
        (lambda: Faults(stragglers="17:1.2"), "straggler: expected a list of tuples"),
        (lambda: Faults(degraded=[("nic", 1)]), "degrade: each entry is a tuple such as"),
        (lambda: Faults.parse(None), "straggler: expected a list of strings, got None"),
        (lambda: Faults.parse("17:1.2"), "straggler: expected a list of strings"),
    ],
)
def test_faults_types(build, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build()


def test_specs_take_numpy_integers() -> None:
    from workloads.specs.layouts import MEGASCALE_MOE

    layout = MEGASCALE_MOE.with_(pp=np.int64(15), micro_batch=np.int32(1))
    assert (type(layout.pp), type(layout.micro_batch)) == (int, int)
    with pytest.raises(ConfigError, match="layout.pp: must be an integer, got np.True_"):
        MEGASCALE_MOE.with_(pp=np.bool_(True))


def test_bool_arguments_take_numpy_bools_without_importing_numpy_themselves() -> None:
    """The checks look numpy up in sys.modules (workloads/specs/fieldtypes.py is_bool): a numpy bool passes as a
    bool, a numpy bool is no integer, and "yes" is no bool."""
    from simulator.report.checks import as_bool
    from workloads.specs.fieldtypes import check_value, is_bool

    assert as_bool("memoize", np.bool_(False)) is False
    assert (is_bool(np.bool_(True)), is_bool(True), is_bool(1), is_bool(np.int64(1))) == (True, True, False, False)
    with pytest.raises(ConfigError, match="memoize: must be True or False"):
        as_bool("memoize", "yes")
    with pytest.raises(ConfigError, match="gpus: must be an integer"):
        check_value("gpus", "int", np.bool_(True))


def test_faults_take_numpy_numbers() -> None:
    assert Faults(stragglers=[(np.int64(3), np.float64(2.0))]).stragglers == ((3, 2.0),)


def test_trace_too_big_is_refused_before_simulating(monkeypatch: pytest.MonkeyPatch, tmp_path, capsys) -> None:
    """The event count the workload fixes is checked as the engine starts (simulator/outputs/trace_size.py), the
    counters as they accrue, and the exact count before the JSON is built."""
    from simulator.engine.engine import Engine
    from simulator.outputs.trace_size import TraceSizeCheck
    from simulator.report.simulate import prepare

    workload, cluster, _ = prepare("paper-352b", "megascale-moe", 240, None, 30, 8192, None, False)
    monkeypatch.setenv("MOESIM_MAX_TRACE_EVENTS", "10000")  # the full trace has 40,695 fixed events
    with pytest.raises(ConfigError, match=r"trace: trace events .* 44,535 exceeds the limit of 10,000"):
        TraceSizeCheck(None, None).on_start(Engine(workload, cluster))
    TraceSizeCheck([0], 2).on_start(Engine(workload, cluster))  # stage 0, 2 micro-batches: 726 + lanes
    path = tmp_path / "t.json"
    error = _one_line(capsys, ["run", "--global-batch", "30", "--trace", str(path)])
    assert error.startswith("trace: trace events") and "MOESIM_MAX_TRACE_EVENTS" in error
    assert not path.exists()
