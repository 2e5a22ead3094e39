"""--version, moesim presets, and help texts that list presets and reproduction targets."""

from __future__ import annotations

from experiments.cli.main import main
from experiments.paper.reproduce import REPRODUCTIONS
from experiments.paper.targets import TARGETS
from topologies.cluster import CLUSTER_PRESETS
from workloads.specs.layouts import LAYOUT_PRESETS
from workloads.specs.models import MODEL_PRESETS

PRESETS = [*MODEL_PRESETS, *LAYOUT_PRESETS, *CLUSTER_PRESETS]


def test_version(capsys) -> None:
    assert main(["--version"]) == 0 and capsys.readouterr().out.startswith("moesim ")


def test_presets_one_line_each(capsys) -> None:
    assert main(["presets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    named = [line.split()[0] for line in lines if line.startswith("  ")]
    assert named == PRESETS  # deepseek-v3 is both a model and a layout


def test_run_help_lists_presets(capsys) -> None:
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in PRESETS) and "mixtral-8x22b      56 layers" in out


def test_reproduce_help_describes_each_target(capsys) -> None:
    assert list(TARGETS) == list(REPRODUCTIONS)
    assert main(["reproduce", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name:<15} {TARGETS[name]}" in out for name in REPRODUCTIONS)
