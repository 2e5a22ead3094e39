"""examples/megatron/deepseek-v3-h100-1024.sh: a launch script in Megatron-LM's own style (bash arrays) reads as
the same job as the validation case's inline flags."""

from __future__ import annotations

from pathlib import Path

import yaml

from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "experiments" / "validation" / "cases" / "bridge-deepseek-v3-h100-1024.yaml"
SCRIPT = ROOT / "examples" / "megatron" / "deepseek-v3-h100-1024.sh"


def test_the_script_is_the_case() -> None:
    model = load_model(ROOT / "examples" / "models" / "deepseek-v3.json")
    inline = yaml.safe_load(CASE.read_text())["megatron_args"]
    from_case = parse_megatron_args(inline).resolve(model, num_gpus=1024)
    script = parse_megatron_args(str(SCRIPT))
    from_script = script.resolve(model, num_gpus=1024)
    assert from_script.layout == from_case.layout and from_script.model == from_case.model
    assert (from_script.global_batch, from_script.seq_len) == (from_case.global_batch, from_case.seq_len)
    assert any("$DATA_PATH" in note for note in script.notes)
