"""docs/outputs.md explains every key `moesim run --json` prints (with --breakdown and --megatron-args, which add
keys, and one level into its objects) and every column of the results/*.csv files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from experiments.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = (ROOT / "docs" / "outputs.md").read_text()


def _keys(value: object) -> set[str]:
    """The object's keys and those of the objects directly inside it (in a list: its objects')."""
    keys: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            keys.add(key)
            for item in inner if isinstance(inner, list) else [inner]:
                if isinstance(item, dict):
                    keys |= set(item) | {k for v in item.values() if isinstance(v, dict) for k in v}
    return keys


def test_every_run_json_key_is_explained(capsys) -> None:
    """A small Megatron-LM job with CP (its own exposed group), --breakdown and an ignored flag: every key."""
    flags = (
        "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2 "
        "--expert-model-parallel-size 4 --context-parallel-size 2 --micro-batch-size 1 --global-batch-size 16 "
        "--seq-length 1024 --bf16 --lr 1e-4"
    )
    model = str(ROOT / "examples" / "models" / "mixtral-8x7b.json")
    argv = ["run", "--model", model, "--cluster", "h100", "--gpus", "16", "--json", "--breakdown"]
    assert main([*argv, "--megatron-args", flags]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {"ignored_args", "megatron_notes", "busiest_stage"} <= set(printed)
    missing = sorted(key for key in _keys(printed) if f"`{key}`" not in GLOSSARY)
    assert missing == [], "docs/outputs.md does not explain these moesim run --json keys"


@pytest.mark.parametrize("path", sorted((ROOT / "results").glob("*.csv")), ids=lambda p: p.name)
def test_every_results_column_is_explained(path: Path) -> None:
    with path.open(newline="") as handle:
        columns = next(csv.reader(handle))
    missing = [column for column in columns if f"`{column}`" not in GLOSSARY]
    assert missing == [], f"docs/outputs.md does not explain these columns of results/{path.name}"


def test_every_compare_and_search_column_is_explained(tmp_path, capsys) -> None:
    """A point's parameters are layout fields or sweep keys (docs/yaml-reference.md); every other column of a compare
    or search table is in the glossary."""
    reference = (ROOT / "docs" / "yaml-reference.md").read_text()
    small = ["--model", "mixtral-8x7b", "--cluster", "h100", "--global-batch", "16"]
    assert (
        main(["compare", *small, "--gpus", "16", "--sweep", "pp=2", "--out", str(tmp_path / "c.csv"), "--quiet"]) == 0
    )
    search = ["search", *small, "--gpus", "16", "--seq-len", "1024", "--fix", "pp=4", "--fix", "micro_batch=1"]
    assert main([*search, "--fix", "schedule=1f1b", "--top", "1", "--out", str(tmp_path / "s.csv"), "--quiet"]) == 0
    capsys.readouterr()
    for name in ("c.csv", "s.csv"):
        with (tmp_path / name).open(newline="") as handle:
            columns = next(csv.reader(handle))
        missing = [
            c
            for c in columns
            if f"`{c}`" not in GLOSSARY and f"- `{c}` (" not in reference and f"- `{c}`\n" not in reference
        ]
        assert missing == [], f"{name}: columns neither docs/outputs.md nor docs/yaml-reference.md explains"
