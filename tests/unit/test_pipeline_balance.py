"""balance_blocks: the layers split over the pipeline blocks by cost (simulator/report/balance.py)."""

from __future__ import annotations

import json

import pytest

from experiments.cli.main import main
from experiments.search.search import balanced_line
from simulator.report.balance import SplitCosts, balanced_counts, stage_costs_s
from simulator.report.simulate import prepare, simulate
from tests.toys import EQUAL_STAGES
from workloads.inputs.megatron_pipeline import layout_text, parse_layout
from workloads.inputs.yaml_files import load_layout
from workloads.specs.layouts import layout_preset

ONE_F_ONE_B = [[0], [1]]
INTERLEAVED = [[0, 2], [1, 3]]  # 2 stages x 2 virtual stages: stage s holds blocks s and s + 2


def test_a_heavy_head_moves_a_layer_forward() -> None:
    """8 layers of 1 s, the head 2 s: 4 | 4 + 2 (busiest 6) -> 5 | 3 + 2 (5); 6 | 2 + 2 would make it 6."""
    costs = SplitCosts((1.0,) * 8, 0.0, 2.0)
    assert balanced_counts(costs, ONE_F_ONE_B) == (5, 3)
    assert stage_costs_s((5, 3), costs, ONE_F_ONE_B) == [5.0, 5.0]


def test_a_split_that_would_not_fit_is_not_taken() -> None:
    """The same, with memory as the first block's layers: an HBM of 4 keeps 4 | 4 (5 | 3 would need 5, more
    than the 4 held now); an HBM of 5 lets it move."""
    costs = SplitCosts((1.0,) * 8, 0.0, 2.0)

    def first_block(counts: tuple[int, ...]) -> float:
        return counts[0]

    assert balanced_counts(costs, ONE_F_ONE_B, peak_bytes=first_block, hbm_bytes=4) == (4, 4)
    assert balanced_counts(costs, ONE_F_ONE_B, peak_bytes=first_block, hbm_bytes=5) == (5, 3)


def test_interleaved_busiest_block_then_busiest_stage() -> None:
    """8 layers of 1 s over 4 blocks, the head 1.5 s: 2 2 2 2 + 1.5 (busiest block 3.5). Taking a layer off
    the last block to block 0 or block 2 both make the busiest block 3 and the busiest stage 5 (blocks 0 + 2
    = 3 + 2 against 2 + 2.5); block 0 is the first found. From 3 2 2 1 no move lowers the busiest block
    below 3 or the busiest stage below 5 (2 2 3 1 ties)."""
    costs = SplitCosts((1.0,) * 8, 0.0, 1.5)
    assert balanced_counts(costs, INTERLEAVED) == (3, 2, 2, 1)
    assert stage_costs_s((3, 2, 2, 1), costs, INTERLEAVED) == [5.0, 4.5]


def test_layer_kinds_are_costed_in_model_order() -> None:
    """Two cheap dense layers (1 s) then two MoE layers (3 s): 2 | 2 is 2 | 6, 3 | 1 is 5 | 3."""
    costs = SplitCosts((1.0, 1.0, 3.0, 3.0), 0.0, 0.0)
    assert balanced_counts(costs, ONE_F_ONE_B) == (3, 1)


def test_a_balanced_split_is_a_fixed_point() -> None:
    costs = SplitCosts((1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 3.0), 0.5, 4.0)
    split = balanced_counts(costs, INTERLEAVED)
    assert sum(split) == 7
    assert balanced_counts(costs, INTERLEAVED, split) == split


@pytest.mark.parametrize(
    "counts, mtp, text",
    [
        ((4,) * 15 + (1,), 1, "Et*4|(t*4|)*14tmL"),  # Megatron-Bridge's DeepSeek-V3 split
        ((9, 10, 10, 7), 0, "Et*9|(t*10|)*2t*7L"),
        ((0, 1), 0, "E|tL"),
    ],
)
def test_layout_text_is_megatron_layout_syntax(counts: tuple, mtp: int, text: str) -> None:
    assert layout_text(counts, mtp) == text
    assert parse_layout(text, len(counts), sum(counts), mtp).layers == counts


def test_balanced_split_is_simulated_and_reported() -> None:
    """A toy with a 262,144 x 2,048 head on PP 2: the balanced split runs faster than the even one, reports
    itself as a Megatron-LM layout, and simulates exactly as that split given by hand."""
    model = EQUAL_STAGES.with_(num_layers=8, vocab_size=262_144)
    base = layout_preset("megascale-moe").with_(pp=2)
    sizes = {"global_batch": 8, "seq_len": 1024}
    even = simulate(model, base, 16, **sizes)
    balanced = simulate(model, base.with_(balance_blocks=True), 16, **sizes)
    assert balanced.step_time_s < even.step_time_s
    counts = parse_layout(balanced.balanced_split, 2, 8, 0).layers
    assert counts != (4, 4)
    by_hand = simulate(model, base.with_(block_layers=counts), 16, **sizes)
    assert by_hand.step_time_s == balanced.step_time_s
    assert by_hand.balanced_split == "" and "pipeline split" in balanced.summary()


def test_deepseek_v3_under_dualpipe_gets_megatron_bridges_hand_made_layout() -> None:
    """DeepSeek-V3 on 2,048 H800s (its report's layout, DualPipe in Fig. 4's order): from the even split the
    balancer arrives at Megatron-Bridge's published 16-block layout (recipes/deepseek, (16, 1)); without the
    memory check it would take a fifth layer onto stage 0, which then holds 76.5 GiB of 74.5."""
    layout = load_layout("examples/layouts/deepseek-v3-dualpipe.yaml")
    balanced = layout.with_(block_layers=(), balance_blocks=True)
    workload, _, _ = prepare("examples/models/deepseek-v3.json", balanced, 2048, None, 15360, 4096, None, False)
    assert layout_text(workload.layout.block_layers, 1) == "Et*4|(t*4|)*14tmL"
    assert workload.layout.block_layers == layout.block_layers


def test_run_names_the_balanced_split_and_breaks_the_busiest_stage_down(capsys) -> None:
    """DeepSeekMoE on PP 4 (28 layers, a 102,400-row head on the last stage): `moesim run` idles over 5% of the
    step on stage imbalance and says the split balance_blocks would take; --breakdown adds the busiest stage
    (the head's), whose parts --json gives by kind of op."""
    argv = ["run", "--model", "deepseekmoe", "--gpus", "32", "--global-batch", "64", "--seq-len", "4096"]
    argv += ["--set", "pp=4", "--breakdown"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "--set balance_blocks=true splits the layers Et*7|t*8|t*7|t*6L" in out
    assert "busiest stage    3, one micro-batch" in out
    assert main(argv + ["--json"]) == 0
    busiest = json.loads(capsys.readouterr().out)["busiest_stage"]
    assert busiest["stage"] == 3 and busiest["compute_s"]["GEMMs"] > 0
    assert main(argv + ["--set", "balance_blocks=true"]) == 0
    out = capsys.readouterr().out
    assert "pipeline split   Et*7|t*8|t*7|t*6L (balance_blocks" in out and "hint" not in out


def test_search_says_what_a_balanced_split_does_to_its_fastest_layout() -> None:
    """A search row (DeepSeekMoE, SP/EP 4, PP 4, 32 H800s) re-simulated with balance_blocks: the line names the
    split and the change against the row's step time; a row whose split would stay says nothing."""
    sizes = {"global_batch": 64, "seq_len": 4096, "micro_batch": 2}
    layout = layout_preset("megascale-moe").with_(intra_size=4, pp=4)
    even = simulate("deepseekmoe", layout, 32, **sizes)
    balanced = simulate("deepseekmoe", layout.with_(balance_blocks=True), 32, **sizes)
    row = {"model": "deepseekmoe", "cluster": "h800", "gpus": "32", "global_batch": "64", "seq_len": "4096"}
    row |= {"intra_size": "4", "pp": "4", "micro_batch": "2", "step_time_s": str(even.step_time_s)}
    change = balanced.step_time_s / even.step_time_s - 1
    assert balanced_line(row) == (
        f"balanced split: the fastest with --set balance_blocks=true (Et*7|t*8|t*7|t*6L) takes "
        f"{balanced.step_time_s:.3f} s, {change:+.1%}"
    )
    assert change < 0
    assert balanced_line({**row, "pp": "1", "intra_size": "8"}) == ""
