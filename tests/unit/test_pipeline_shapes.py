"""Pipelines of any shape: uneven blocks under every schedule, and explicit per-block layer counts."""

from __future__ import annotations

import pytest

from simulator.report.simulate import simulate
from tests.toys import EQUAL_STAGES
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload, block_layer_counts
from workloads.specs.layouts import layout_preset

SEVEN = EQUAL_STAGES.with_(num_layers=7)
BASE = layout_preset("megascale-moe").with_(pp=2, uneven_pp=True)


def test_uneven_counts_shorten_the_last_then_the_first_blocks() -> None:
    """7 layers over 4 blocks: 1 each and 3 to spare; the last block (the LM head's) stays short."""
    assert block_layer_counts(7, 4) == [2, 2, 2, 1]
    assert block_layer_counts(6, 4) == [1, 2, 2, 1]  # then the first (the embedding's)
    assert block_layer_counts(61, 64) == [0] + [1] * 61 + [0, 0]


@pytest.mark.parametrize(
    "changes, stage_layers",
    [
        ({"schedule": "interleaved", "virtual_stages": 2}, ([0, 1, 4, 5], [2, 3, 6])),  # blocks 0, 2 | 1, 3
        ({"schedule": "dualpipe", "pp": 4}, ([0, 1, 6], [2, 3, 4, 5], [4, 5, 2, 3], [6, 0, 1])),  # s, pp-1-s
        ({"block_layers": (1, 6)}, ([0], [1, 2, 3, 4, 5, 6])),  # explicit counts
    ],
)
def test_stage_layers_of_each_shape(changes: dict, stage_layers: tuple) -> None:
    layout = BASE.with_(**changes)
    workload = StepWorkload(SEVEN, layout, 8 * layout.pp, 8, global_batch=4 * layout.pp, seq_len=1024)
    assert tuple(workload.stage_layers(s) for s in range(layout.pp)) == stage_layers
    report = simulate(SEVEN, layout, 8 * layout.pp, global_batch=4 * layout.pp, seq_len=1024)
    assert report.step_time_s > 0


def test_explicit_block_layers_must_cover_the_model() -> None:
    with pytest.raises(ConfigError) as error:
        StepWorkload(SEVEN, BASE.with_(block_layers=(3, 3)), 16, 8, global_batch=8, seq_len=1024)
    assert error.value.field == "layout.block_layers"
    with pytest.raises(ConfigError):
        BASE.with_(block_layers=(8, -1))


def test_more_layers_on_a_stage_take_longer() -> None:
    """Moving a layer from stage 1 to stage 0 makes stage 0's forward longer by one layer's forward."""
    even = simulate(EQUAL_STAGES.with_(num_layers=8), BASE.with_(uneven_pp=False), 16, global_batch=8, seq_len=1024)
    skewed = simulate(
        EQUAL_STAGES.with_(num_layers=8), BASE.with_(block_layers=(5, 3)), 16, global_batch=8, seq_len=1024
    )
    assert skewed.step_time_s > even.step_time_s


def test_dualpipev_block_layers_count_its_two_blocks_per_rank() -> None:
    """DualPipeV cuts the model into 2 x pp blocks: explicit counts for its 4 blocks at pp 2 run as the default
    split they spell out; 2 counts (pp x virtual_stages) are refused, naming the 4 blocks."""
    layout = BASE.with_(schedule="dualpipev")
    sizes = {"global_batch": 8, "seq_len": 1024}
    default = simulate(SEVEN, layout, 16, **sizes)
    explicit = simulate(SEVEN, layout.with_(block_layers=tuple(block_layer_counts(7, 4))), 16, **sizes)
    assert explicit.step_time_s == default.step_time_s
    with pytest.raises(ConfigError, match="each of the 4 pipeline blocks"):
        StepWorkload(SEVEN, layout.with_(block_layers=(4, 3)), 16, 8, **sizes)
