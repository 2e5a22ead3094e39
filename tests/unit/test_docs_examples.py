"""The examples of the documentation are accepted as shown: YAML files by the strict loaders of their kind (a sweep
file as the shipped one it shows), and every `moesim` command of a code block by the command line's parser."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from simulator.report.clusters import load_cluster
from workloads.inputs.yaml_files import load_layout, load_model

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("files.md", "hardware.md")
BLOCKS = [
    (page, block)
    for page in PAGES
    for block in re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / page).read_text(), re.DOTALL)
]


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=[f"{p}-{i}" for i, (p, _) in enumerate(BLOCKS)])
def test_yaml_example_loads(page: str, block: str, tmp_path) -> None:
    """Written to a file and read by the loader its kind's flag uses (--cluster, --model, --layout)."""
    keys = set(yaml.safe_load(block))
    path = tmp_path / "example.yaml"
    path.write_text(block)
    if "output" in keys:  # a sweep file: the page shows a shipped one verbatim
        assert block in [path.read_text() for path in (ROOT / "examples" / "sweeps").glob("*.yaml")]
    elif keys & {"nic_bandwidth_Bps", "domain_gpus", "gpu", "gpus_per_host", "domain_gpus_used"}:
        assert load_cluster(str(path), 16).num_gpus == 16
    elif "num_layers" in keys:
        assert load_model(str(path)).name == "example"
    else:
        assert load_layout(str(path)).name == "example"


def test_every_kind_is_shown() -> None:
    keys = [set(yaml.safe_load(block)) for _, block in BLOCKS]
    assert any("output" in k for k in keys) and any("num_layers" in k for k in keys) and any("gpu" in k for k in keys)


def _commands(text: str) -> list[str]:
    """The `moesim ...` lines of the page's code blocks (with a `$ ` prompt or without), continuations joined."""
    commands = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL):
        joined = re.sub(r"\\\n", " ", block)
        commands += [line.split("  #")[0] for line in re.findall(r"^(?:\$ )?(moesim .*)$", joined, re.MULTILINE)]
    return commands


@pytest.mark.parametrize("page", ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))])
def test_every_shown_command_parses(page: str) -> None:
    """Flags and values as the command line takes them (the commands are not run here; the pages' tests run them)."""
    from experiments.cli.main import _parser

    for command in _commands((ROOT / page).read_text()):
        argv = shlex.split(command)[1:]
        try:
            _parser(argv[0]).parse_args(argv)
        except SystemExit:
            pytest.fail(f"{page}: {command}")


def test_the_readme_shows_commands() -> None:
    assert len(_commands((ROOT / "README.md").read_text())) >= 3
