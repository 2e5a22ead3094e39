"""--model by name: a shipped config.json, a Hugging Face hub id in the local cache, or how to get it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from topologies.errors import ConfigError
from workloads.inputs.huggingface.config import load_hf_config
from workloads.inputs.huggingface.names import SHIPPED, SHIPPED_REPOSITORIES, cached_config, hub_cache
from workloads.inputs.yaml_files import load_model


def test_a_shipped_config_by_its_name() -> None:
    assert load_model("qwen3-30b-a3b") == load_hf_config(SHIPPED / "qwen3-30b-a3b.json")
    assert load_model("mixtral-8x7b").name == "mixtral-8x7b"  # a preset keeps winning over a shipped file


def _cache(root: Path, hub_id: str, revision: str) -> Path:
    repo = root / f"models--{hub_id.replace('/', '--')}"
    (repo / "snapshots" / revision).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision + "\n")
    target = repo / "snapshots" / revision / "config.json"
    shutil.copy(SHIPPED / "qwen3-30b-a3b.json", target)
    return target


def test_a_hub_id_from_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    target = _cache(tmp_path, "Qwen/Qwen3-30B-A3B", "0123abc")
    assert hub_cache() == tmp_path and cached_config("Qwen/Qwen3-30B-A3B") == target
    model = load_model("Qwen/Qwen3-30B-A3B")
    assert model.name == "Qwen3-30B-A3B" and model.num_experts == 128


def test_hf_home_and_the_default_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert hub_cache() == tmp_path / "hub"
    monkeypatch.delenv("HF_HOME")
    assert hub_cache() == Path.home() / ".cache" / "huggingface" / "hub"


def test_a_name_not_on_this_machine_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match=r"^model: unknown preset .*huggingface-cli download Org/Nope config.json"):
        load_model("Org/Nope")
    with pytest.raises(ConfigError, match=r"^model: unknown preset 'nope'.*config.json path"):
        load_model("nope")


def test_a_misspelled_name_is_told_the_nearest_preset_or_shipped_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``llama3-8b`` is no preset and no shipped file, but examples/models ships llama-3.1-8b: the error names it
    (and the next nearest), a hub id is matched by its model part, a name near nothing gets no guess."""
    with pytest.raises(ConfigError, match=r"did you mean llama-3\.1-8b \(or llama-3\.1-70b"):
        load_model("llama3-8b")
    with pytest.raises(ConfigError, match=r"did you mean mixtral-8x7b \(or mixtral-8x22b\)\?"):
        load_model("mixtral8x7b")  # a preset and a shipped config.json by the same name: named once
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty cache
    with pytest.raises(ConfigError, match=r"did you mean qwen3-32b .*huggingface-cli download"):
        load_model("Qwen/Qwen3-30B")
    # Nemotron 3 Super ships as a model YAML written from Megatron-LM's flags, not as a config.json: its path is named
    with pytest.raises(ConfigError, match=r"did you mean examples/models/nemotron-3-super-120b-a12b\.yaml\?"):
        load_model("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16")
    with pytest.raises(ConfigError) as nothing_near:
        load_model("zzzz")
    assert "did you mean" not in str(nothing_near.value)


def test_a_hub_id_not_in_the_cache_takes_the_shipped_config_of_its_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty cache: ``Qwen/Qwen3-30B-A3B`` (any case) is the shipped qwen3-30b-a3b.json, named by the hub id."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    shipped = load_hf_config(SHIPPED / "qwen3-30b-a3b.json")
    for hub_id in ("Qwen/Qwen3-30B-A3B", "qwen/qwen3-30b-a3b"):
        model = load_model(hub_id)
        assert model.with_(name=shipped.name) == shipped and model.name == hub_id.split("/")[1]
    with pytest.raises(ConfigError, match="huggingface-cli download Qwen/Qwen3-30B-A3B-Instruct"):
        load_model("Qwen/Qwen3-30B-A3B-Instruct")  # another repository: not guessed


def test_every_shipped_config_names_its_repository_as_the_readme_does() -> None:
    """SHIPPED_REPOSITORIES and examples/models/README.md's table list the same hub id for every shipped file."""
    table = {}
    for line in (SHIPPED / "README.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0].endswith(".json`"):
            table[cells[0].strip("`").removesuffix(".json")] = cells[1].split()[0].lower()
    assert sorted(table) == sorted(path.stem for path in SHIPPED.glob("*.json"))
    assert {hub_id: stem for stem, hub_id in table.items()} == SHIPPED_REPOSITORIES
