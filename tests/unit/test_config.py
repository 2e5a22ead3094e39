"""YAML models and layouts: strict loading, round trips, presets, and the CLI/API hooks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments.cli.main import main
from simulator.report.simulate import resolve
from topologies.errors import ConfigError
from workloads.inputs.yaml_files import (
    layout_from_dict,
    layout_to_yaml,
    load_layout,
    load_model,
    model_from_dict,
    model_to_yaml,
    parse_yaml,
)
from workloads.specs.layouts import LAYOUT_PRESETS, MEGASCALE_MOE
from workloads.specs.models import MODEL_PRESETS

TINY = {
    "name": "tiny",
    "num_layers": 4,
    "hidden_size": 1024,
    "num_heads": 16,
    "num_kv_heads": 4,
    "expert_ffn_size": 2048,
    "num_experts": 8,
    "top_k": 2,
}


def write(tmp_path: Path, name: str, text: str) -> str:
    """Write text to tmp_path/name and return the path as a string."""
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("name", sorted(MODEL_PRESETS))
def test_model_round_trip(name: str) -> None:
    model = MODEL_PRESETS[name]
    assert model_from_dict(yaml.safe_load(model_to_yaml(model))) == model


@pytest.mark.parametrize("name", sorted(LAYOUT_PRESETS))
def test_layout_round_trip(name: str, tmp_path: Path) -> None:
    layout = LAYOUT_PRESETS[name]
    assert load_layout(write(tmp_path, "x.yml", layout_to_yaml(layout))) == layout


def test_presets_and_specs_pass_through() -> None:
    assert load_model("paper-352b") is MODEL_PRESETS["paper-352b"]
    assert load_layout(MEGASCALE_MOE) is MEGASCALE_MOE


def test_layout_base_overrides(tmp_path: Path) -> None:
    layout = load_layout(write(tmp_path, "mine.yaml", "base: megatron-lm\npp: 5\n"))
    assert layout == LAYOUT_PRESETS["megatron-lm"].with_(name="mine", pp=5)


def test_model_name_defaults_to_stem(tmp_path: Path) -> None:
    data = dict(TINY)
    del data["name"]
    assert load_model(write(tmp_path, "small.yaml", yaml.safe_dump(data))).name == "small"


@pytest.mark.parametrize(
    "change, field",
    [
        ({"foo": 1}, "model.foo"),
        ({"num_layers": "4"}, "model.num_layers"),
        ({"num_layers": True}, "model.num_layers"),
        ({"num_layers": 4.0}, "model.num_layers"),
        ({"hidden_size": None}, "model.hidden_size"),
        ({"top_k": 0}, "model.top_k"),
        ({"num_heads": 3}, "model.num_heads"),
    ],
)
def test_model_errors_name_the_field(change: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        model_from_dict({**TINY, **change})
    assert info.value.field == field


def test_missing_and_unknown_messages() -> None:
    data = dict(TINY)
    del data["top_k"]
    with pytest.raises(ConfigError, match=r"^model.top_k: missing required key$"):
        model_from_dict(data)
    with pytest.raises(ConfigError, match=r"^model.foo: unknown key; allowed: name, num_layers"):
        model_from_dict({**TINY, "foo": 1})


@pytest.mark.parametrize(
    "data, field",
    [
        ({"base": "nope"}, "layout.base"),
        ({"base": 3}, "layout.base"),
        ({"base": "megascale-moe", "pp": "2"}, "layout.pp"),
        ({"base": "megascale-moe", "inter_op_overlap": "yes"}, "layout.inter_op_overlap"),
        ({"base": "megascale-moe", "capacity_factor": float("nan")}, "layout.capacity_factor"),
        ({"base": "megascale-moe", "recompute": "some"}, "layout.recompute"),
        ({"pp": 2}, "layout.name"),
    ],
)
def test_layout_errors_name_the_field(data: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        layout_from_dict(data)
    assert info.value.field == field


def test_capacity_factor_int_is_accepted() -> None:
    assert layout_from_dict({"name": "x", "capacity_factor": 2}).capacity_factor == 2.0


@pytest.mark.parametrize("text", ["[1, 2", "- 1\n- 2\n", "42", "", "a: [1\n", "x: 2001-13-45\n"])
def test_bad_yaml_text(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_layout(layout_from_dict(parse_yaml("layout", text)))
    assert info.value.field.startswith("layout")


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^model: cannot read"):
        load_model(str(tmp_path / "absent.yaml"))
    with pytest.raises(ConfigError, match="^layout: cannot read"):
        load_layout(tmp_path)  # a directory
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="^model"):
        load_model(binary)
    with pytest.raises(ConfigError, match="^model"):
        load_model(3)  # type: ignore[arg-type]


def test_resolve_accepts_paths(tmp_path: Path) -> None:
    model, layout, _ = resolve(
        write(tmp_path, "m.yaml", yaml.safe_dump(TINY)),
        write(tmp_path, "l.yaml", "base: megascale-moe\npp: 2\n"),
        None,
        16,
    )
    assert model.name == "tiny" and layout.pp == 2


def test_cli_runs_files(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    m = write(tmp_path, "m.yaml", yaml.safe_dump(TINY))
    lay = write(tmp_path, "l.yaml", "base: megascale-moe\npp: 2\n")
    argv = ["run", "--model", m, "--layout", lay, "--gpus", "16", "--global-batch", "16", "--seq-len", "512", "--json"]
    assert main(argv) == 0
    assert '"model": "tiny"' in capsys.readouterr().out
    bad = write(tmp_path, "bad.yaml", "base: megascale-moe\nfoo: 1\n")
    assert main(["run", "--layout", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moesim: error: layout.foo: unknown key")
