"""The flex dispatcher's static per-rank budget and the paged stash in memory (LayoutSpec expert_rank_capacity,
paged_stash_factor; simulator.memory): budget-sized routed activations and buffers, average-sized pages, by hand."""

from __future__ import annotations

import pytest

from simulator.memory.activations import layer_saved
from simulator.memory.per_gpu import stage_memory
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

FLEX = (
    "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --expert-model-parallel-size 8 "
    "--moe-grouped-gemm --use-transformer-engine-op-fuser --moe-expert-rank-capacity-factor 1.5"
)
MODEL = ModelSpec("m", 2, 1024, 8, 8, 512, 8, 2, vocab_size=1024)  # h 1024, 8 experts of 512, top-2


def _fields(flags: str) -> tuple[float, float]:
    fields = parse_megatron_args(flags).layout_fields
    return fields["expert_rank_capacity"], fields["paged_stash_factor"]


def test_flags() -> None:
    """No budget, the budget, the paged stash at its default 1.10 (avg-based) and at a negative factor (the actual
    maximum: the budget), as TransformerConfig reads moe_paged_stash_buffer_size_factor_cuda."""
    assert "expert_rank_capacity" not in parse_megatron_args("--expert-model-parallel-size 8").layout_fields
    assert _fields(FLEX) == (1.5, 0.0)
    assert _fields(FLEX + " --moe-paged-stash") == (1.5, 1.10)
    assert _fields(FLEX + " --moe-paged-stash --moe-paged-stash-buffer-size-factor-cuda -1") == (1.5, 1.5)


def test_paged_stash_needs_the_budget() -> None:
    with pytest.raises(ConfigError) as error:
        parse_megatron_args("--moe-paged-stash")
    assert error.value.field == "--moe-paged-stash" and "requires moe_expert_rank_capacity_factor" in error.value.rule
    with pytest.raises(ConfigError, match="needs expert_rank_capacity"):
        LayoutSpec("t", paged_stash_factor=1.1)


def _layout(**changes) -> LayoutSpec:
    return LayoutSpec(
        "t", attention="tp", intra_size=1, pp=1, ep=8, dropless=True, capacity_factor=1.0, recompute="none", **changes
    )


def test_routed_activations_by_hand() -> None:
    """Per local token, 2 routed copies: fc1's input h, its output 2F and fc2's input F in BF16, times 1.5 under the
    budget, times 1.1 in the paged stash's pages."""
    per_copy = {"expert_fc1_input": 2 * 1024, "expert_fc1_output": 2 * 2 * 512, "expert_fc2_input": 2 * 512}
    for changes, pad in (
        ({}, 1.0),
        ({"expert_rank_capacity": 1.5}, 1.5),
        ({"expert_rank_capacity": 1.5, "paged_stash_factor": 1.1}, 1.1),
    ):
        saved = {s.name: s.bytes_per_token for s in layer_saved(MODEL, _layout(**changes), dense=False)}
        for name, per in per_copy.items():
            assert saved[name] == pytest.approx(2 * pad * per)


def test_static_buffers_by_hand() -> None:
    """The dispatch and combine buffers (4 x local tokens x top-k x h BF16) sized for the budget: x 1.5."""
    plain = stage_memory(StepWorkload(MODEL, _layout(), 8, 8, 8, 1024), 0).buffers_bytes
    budget = stage_memory(StepWorkload(MODEL, _layout(expert_rank_capacity=1.5), 8, 8, 8, 1024), 0).buffers_bytes
    assert plain == 4 * 1024 * 2 * 1024 * 2 and budget == 1.5 * plain
