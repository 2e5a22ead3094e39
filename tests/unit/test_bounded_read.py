"""Every input file is a regular file within a size limit, checked before it is read (workloads/inputs/bounded_read.py):
devices, FIFOs, folders and oversized files are one ConfigError naming the field and the limit, exit status 2."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import pytest

from experiments.cli.main import main
from experiments.validation.corpus import load_cases
from topologies.errors import ConfigError
from workloads.inputs.bounded_read import read_bounded
from workloads.inputs.megatron_args import read_text
from workloads.inputs.yaml_files import load_layout, load_model
from workloads.specs.limits import DEFAULTS

RUN = ["run", "--model", "mixtral-8x7b", "--gpus", "32"]


@pytest.fixture(autouse=True)
def _no_hang():
    """A read that blocks (a FIFO opened without O_NONBLOCK) fails the test instead of hanging the run."""
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the read blocked"))
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_regular_file_within_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("name: x\n")
    assert read_bounded("model", path) == "name: x\n"


def test_every_limit_is_one_mebibyte_or_more() -> None:
    for name in ("yaml_bytes", "json_bytes", "args_bytes", "case_bytes"):
        assert DEFAULTS[name] >= 1 << 20  # 50x the largest real file of each kind (workloads/specs/limits.py)


@pytest.mark.parametrize("limit_name", ["yaml_bytes", "json_bytes", "args_bytes", "case_bytes"])
def test_a_device_is_refused_with_the_limit_named(limit_name: str) -> None:
    with pytest.raises(ConfigError, match=rf"character device, not a regular file.*MOESIM_MAX_{limit_name.upper()}"):
        read_bounded("field", "/dev/zero", limit_name)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "args.sh"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="a FIFO, not a regular file"):
        read_bounded("--megatron-args", fifo, "args_bytes")


def test_a_fifo_swapped_in_after_the_stat_is_refused_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stat says regular file, the open finds a FIFO: O_NONBLOCK returns at once and fstat refuses it."""
    fifo = tmp_path / "late.yaml"
    os.mkfifo(fifo)
    regular = os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, 10, 0, 0, 0))
    monkeypatch.setattr(os, "stat", lambda *_args, **_kwargs: regular)
    with pytest.raises(ConfigError, match="a FIFO, not a regular file"):
        read_bounded("model", fifo)


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="a folder, not a regular file"):
        read_bounded("layout", tmp_path)


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOESIM_MAX_ARGS_BYTES", "100")
    path = tmp_path / "train.sh"
    path.write_text("--num-layers 2 " * 7)  # 105 bytes
    with pytest.raises(ConfigError, match=r"105 exceeds the limit of 100; set MOESIM_MAX_ARGS_BYTES"):
        read_bounded("--megatron-args", path, "args_bytes")
    path.write_text("--num-layers 2 " * 6)  # 90 bytes: within it
    assert read_bounded("--megatron-args", path, "args_bytes").count("--num-layers") == 6


def test_text_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_bytes(b"name: \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        read_bounded("model", path)


def test_megatron_arguments_from_a_device_fifo_or_oversized_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"^--megatron-args: .*character device.*MOESIM_MAX_ARGS_BYTES"):
        read_text("/dev/zero")
    os.mkfifo(tmp_path / "fifo.sh")
    with pytest.raises(ConfigError, match="a FIFO"):
        read_text(str(tmp_path / "fifo.sh"))
    monkeypatch.setenv("MOESIM_MAX_ARGS_BYTES", "64")
    with pytest.raises(ConfigError, match="MOESIM_MAX_ARGS_BYTES"):  # pasted inline arguments are bounded too
        read_text("--num-layers 2 " * 10)


def test_a_model_or_layout_yaml_link_to_a_device_is_refused(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").symlink_to("/dev/zero")
    (tmp_path / "config.json").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match=r"^model: .*character device.*MOESIM_MAX_YAML_BYTES"):
        load_model(str(tmp_path / "m.yaml"))
    with pytest.raises(ConfigError, match=r"^layout: .*character device"):
        load_layout(str(tmp_path / "m.yaml"))
    with pytest.raises(ConfigError, match=r"^model: .*character device.*MOESIM_MAX_JSON_BYTES"):
        load_model(str(tmp_path / "config.json"))


def test_a_case_folder_with_a_link_to_a_device_is_refused(tmp_path: Path) -> None:
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match=r"^zero\.yaml: .*character device.*MOESIM_MAX_CASE_BYTES"):
        load_cases(tmp_path)


@pytest.mark.parametrize(
    "argv",
    [
        [*RUN, "--megatron-args", "/dev/zero"],
        ["validate", "--cases", "/dev/zero"],
        ["sweep", "/dev/zero"],
        ["run", "--model", "mixtral-8x7b", "--gpus", "8", "--cluster", "/dev/null/c.yaml"],
    ],
)
def test_the_commands_refuse_in_one_line_with_status_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[0] == "validate":
        argv = [*argv, "--out", str(tmp_path / "v.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moesim: error: ") and "cannot read" in err[0], err


def test_a_model_name_too_long_for_a_file_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A 5,000-character --model was an OSError traceback (File name too long) in the shipped-config lookup."""
    assert main(["run", "--model", "x" * 5000, "--gpus", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moesim: error: model: "), err


def test_a_hub_cache_ref_over_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """refs/main of a cached hub model is read like every input: within a limit, named when it is exceeded."""
    refs = tmp_path / "models--org--name" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("0" * 100)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("MOESIM_MAX_JSON_BYTES", "64")
    with pytest.raises(ConfigError, match="^model: .*100 exceeds the limit of 64; set MOESIM_MAX_JSON_BYTES"):
        load_model("org/name")
