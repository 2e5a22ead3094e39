"""The generated documentation pages are what the code gives now (python -m experiments.cli.docs_pages rewrites
them): the command-line reference from the parsers, the YAML field reference from the specs, the Megatron-LM flag
coverage from its classification, the validation results from results/REPRODUCTION.md, the changelog's copy."""

from __future__ import annotations

import re

import pytest

from experiments.cli.docs_pages import DOCS, PAGES


@pytest.mark.parametrize("name", sorted(PAGES))
def test_generated_page_is_current(name: str) -> None:
    path = DOCS / name
    assert path.exists(), f"docs/{name} is missing: python -m experiments.cli.docs_pages"
    assert path.read_text() == PAGES[name](), f"docs/{name} is stale: python -m experiments.cli.docs_pages"


def test_cli_page_names_every_subcommand_and_flag() -> None:
    """Each subcommand has its section and each of its flags a line (the generator's own walk, checked apart)."""
    import argparse

    from experiments.cli.main import _parser

    page = (DOCS / "cli.md").read_text()
    parser = _parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in commands.choices.items():
        section = page.split(f"## `moesim {name}`", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in section, f"moesim {name} {flag}"


def test_yaml_reference_names_every_field() -> None:
    import dataclasses

    from topologies.cluster import ClusterSpec
    from topologies.hardware import GpuSpec
    from workloads.specs.layouts import LayoutSpec
    from workloads.specs.models import ModelSpec

    page = (DOCS / "yaml-reference.md").read_text()
    for spec in (ModelSpec, LayoutSpec, ClusterSpec, GpuSpec):
        for field in dataclasses.fields(spec):
            if field.name != "num_gpus":  # the job's, never a file's
                assert f"- `{field.name}` (" in page, f"{spec.__name__}.{field.name}"


def test_megatron_page_classes_every_pinned_flag() -> None:
    from workloads.inputs import megatron_args, megatron_flag_list

    page = (DOCS / "megatron-flags.md").read_text()
    for flag in (*megatron_flag_list.pinned_flags(), *megatron_args.FLAGS):
        assert f"`{flag}`" in page, flag


def test_every_modelled_megatron_flag_has_a_row() -> None:
    """docs/megatron.md's table says what each flag moesim reads becomes (the coverage page only lists them)."""
    from workloads.inputs.megatron_args import FLAGS

    table = "\n".join(line for line in (DOCS / "megatron.md").read_text().split("\n") if line.startswith("| `--"))
    missing = [flag for flag in FLAGS if not re.search(re.escape(flag) + r"(?![\w-])", table)]
    assert missing == [], "add a row for these flags to the table of docs/megatron.md"


def test_every_preset_is_named_in_the_files_page() -> None:
    from topologies.cluster import CLUSTER_PRESETS
    from workloads.specs.layouts import LAYOUT_PRESETS
    from workloads.specs.models import MODEL_PRESETS

    page = (DOCS / "files.md").read_text()
    missing = [name for name in (*MODEL_PRESETS, *LAYOUT_PRESETS, *CLUSTER_PRESETS) if f"`{name}`" not in page]
    assert missing == [], "name these presets in docs/files.md's Presets section"


def test_every_config_json_model_type_is_named() -> None:
    """docs/megatron.md names each model_type moesim reads, docs/limits.md each it refuses."""
    from workloads.inputs.huggingface.config import NOT_EXPRESSED, READERS

    read = (DOCS / "megatron.md").read_text()
    refused = (DOCS / "limits.md").read_text()
    assert [t for t in READERS if not re.search(rf"\b{t}\b", read)] == []
    assert [t for t in NOT_EXPRESSED if f"`{t}`" not in refused] == []
