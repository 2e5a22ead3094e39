"""Activation offloading (workloads/specs/memory_options.py): Megatron's flags as layout fields, the rules it refuses
them by, and what leaves HBM, computed by hand from the saved-tensor inventory (simulator/memory/activations.py)."""

from __future__ import annotations

import pytest

from simulator.memory.activations import layer_saved, local_tokens, megatron_layer_bytes
from simulator.memory.per_gpu import block_layer_bytes
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

MOE = ModelSpec("toy-moe", 4, 1024, 8, 4, 2048, 8, 2, 1024)
SEQ = 4096


def _layout(**changes: object) -> LayoutSpec:
    fields = {"attention": "tp", "ffn": "ep", "intra_size": 1, "pp": 1, "ep": 8, "recompute": "none", "dropless": True}
    return LayoutSpec("t", **{**fields, **changes})


def _bytes(layout: LayoutSpec, name: str) -> float:
    saved = next(s for s in layer_saved(MOE, layout, dense=False) if s.name == name)
    return local_tokens(layout, SEQ) * saved.bytes_per_token


def test_flags_give_the_fields() -> None:
    fine = parse_megatron_args(
        "--fine-grained-activation-offloading --offload-modules moe_act core_attn attn_proj "
        "--min-offloaded-tensor-size 5000"
    ).layout_fields
    assert (fine["offload_modules"], fine["offload_min_elements"]) == (("moe_act", "core_attn", "attn_proj"), 5000)
    assert parse_megatron_args("--cpu-offloading-num-layers 3").layout_fields["offload_layers"] == 3
    alone = parse_megatron_args("--offload-modules moe_act")
    assert alone.layout_fields["offload_modules"] == () and any("no effect" in note for note in alone.notes)
    with pytest.raises(ConfigError, match="needs --offload-modules"):
        parse_megatron_args("--fine-grained-activation-offloading")


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"offload_modules": ("fused_group_mlp", "moe_act")}, "cannot be combined with expert_fc1 or moe_act"),
        ({"offload_modules": ("attn_proj",)}, "must be used together with core_attn"),
        ({"offload_modules": ("router",)}, "is not one of"),
        ({"offload_layers": 1, "offload_modules": ("moe_act",)}, "cannot be enabled with cpu_offloading"),
        ({"offload_layers": 1, "pp": 2}, "no support for Pipeline parallelism"),
        ({"offload_layers": 1, "recompute": "full"}, "does not work when activation recomputation is enabled"),
    ],
)
def test_refused_as_megatron_refuses(changes: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        _layout(**changes)


def test_offloading_every_layer_is_refused() -> None:
    with pytest.raises(ConfigError, match="only for layers less than 4"):
        StepWorkload(MOE, _layout(offload_layers=4), 8, 8, 8, SEQ)


def test_a_module_offloads_its_input_above_the_size_threshold() -> None:
    """moe_act's input is the experts' fc1 output; fused_group_mlp takes the grouped MLP's three saved tensors; a
    tensor under offload_min_elements stays."""
    base = _layout()
    whole = megatron_layer_bytes(MOE, base, SEQ, dense=False)
    fc1_out, fc1_in, fc2_in = (_bytes(base, n) for n in ("expert_fc1_output", "expert_fc1_input", "expert_fc2_input"))
    act = _layout(offload_modules=("moe_act",))
    assert megatron_layer_bytes(MOE, act, SEQ, dense=False) == pytest.approx(whole - fc1_out)
    grouped = _layout(offload_modules=("fused_group_mlp",))
    assert megatron_layer_bytes(MOE, grouped, SEQ, dense=False) == pytest.approx(whole - fc1_out - fc1_in - fc2_in)
    elements = fc1_out / 2  # BF16
    kept = _layout(offload_modules=("moe_act",), offload_min_elements=int(elements) + 1)
    assert megatron_layer_bytes(MOE, kept, SEQ, dense=False) == pytest.approx(whole)
    attention = _layout(offload_modules=("core_attn", "attn_proj"))
    qkv_out = _bytes(base, "q_k_v") + _bytes(base, "attn_out")
    assert megatron_layer_bytes(MOE, attention, SEQ, dense=False) == pytest.approx(whole - qkv_out)


def test_offloaded_layers_hold_only_the_one_in_transit() -> None:
    """--cpu-offloading-num-layers 3 of 4: the first three layers' state goes to host memory, one of them on the GPU
    while it is copied."""
    plain = StepWorkload(MOE, _layout(), 8, 8, 8, SEQ)
    offloaded = StepWorkload(MOE, _layout(offload_layers=3), 8, 8, 8, SEQ)
    sizes = block_layer_bytes(plain, range(4))
    assert block_layer_bytes(offloaded, range(4)) == [max(sizes[:3]), 0.0, 0.0, sizes[3]]


def test_the_report_says_what_goes_to_host_memory() -> None:
    """What offloading moves out is its own memory term, outside the GPU's total: the difference to the same step
    without it."""
    from simulator.memory.per_gpu import offloaded_activation_bytes, stage_memory

    plain_step = StepWorkload(MOE, _layout(), 8, 8, 8, SEQ)
    offloading = StepWorkload(MOE, _layout(offload_modules=("moe_act",)), 8, 8, 8, SEQ)
    plain, offloaded = stage_memory(plain_step, 0), stage_memory(offloading, 0)
    moved = offloaded_activation_bytes(offloading, 0)
    assert offloaded_activation_bytes(plain_step, 0) == 0.0 and moved > 0
    assert offloaded.activations_bytes + moved == pytest.approx(plain.activations_bytes)
    assert plain.total_bytes - offloaded.total_bytes == pytest.approx(moved)
    assert offloaded.report_gib(moved)["offloaded to host"] == pytest.approx(moved / 2**30)
