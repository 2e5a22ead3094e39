"""The hints of a layout that does not divide the cluster: its GPU count, its expert groups (workloads/specs/hints.py)."""

import pytest

from experiments.cli.main import main
from topologies.errors import ConfigError
from workloads.specs.hints import gpus_hint
from workloads.specs.layouts import LAYOUT_PRESETS
from workloads.specs.models import MODEL_PRESETS
from workloads.specs.validation import check_step


def test_a_huge_gpu_count_gets_its_hint_without_counting_to_it() -> None:
    """Found by test_fuzz_simulate_arguments: --gpus 10**18 + 1 looped over every pipeline degree up to the
    GPU count. A stage holds at least one layer, so only pp <= num_layers is tried: paper-352b's 60 layers and
    the megascale-moe layout's intra size 8 give 10**18 + 1 (odd) no fitting pp, and the nearest multiples."""
    model, layout = MODEL_PRESETS["paper-352b"], LAYOUT_PRESETS["megascale-moe"]
    unit = layout.intra_size * layout.cp * layout.pp
    gpus = 10**18 + 1
    below = gpus // unit * unit
    assert gpus_hint(model, layout, gpus) == f"; try --gpus {below} or {below + unit}"


def test_the_hint_names_the_nearest_counts_and_pps_that_fit() -> None:
    """200 GPUs of paper-352b (60 layers) on megascale-moe (intra size 8, pp 15): 8 x 15 = 120 does not divide
    200, whose nearest multiples are 120 and 240; 200 % (8 pp) == 0 for pp 1, 5, 25, of which 1 and 5 divide
    the 60 layers, nearest to 15 first."""
    model, layout = MODEL_PRESETS["paper-352b"], LAYOUT_PRESETS["megascale-moe"]
    assert gpus_hint(model, layout, 200) == "; try --gpus 120 or 240, or --set pp=5 (or 1)"


def test_an_expert_group_too_large_for_a_stage_is_told_the_degrees_that_fit() -> None:
    """paper-352b (32 experts) on megascale-moe (intra size 8) at pp 30 over 240 GPUs: a stage holds 240 / 30 = 8
    GPUs, so EP 16 does not fit; EP 8 does (EP 4 is below the intra size), pp 15 gives 16 GPUs a stage (60 layers
    split 4 a stage), and 480 GPUs are the next count whose stages hold 16 (30 x 16)."""
    model = MODEL_PRESETS["paper-352b"]
    layout = LAYOUT_PRESETS["megascale-moe"].with_(ep=16, pp=30)
    with pytest.raises(ConfigError) as error:
        check_step(model, layout, 240, 8, 240, 8192)
    assert error.value.field == "layout.ep"
    assert error.value.rule == (
        "EP 16 x ETP 1 = 16 does not divide the 8 GPUs of a stage (240 / pp 30); try --set ep=8, or --set pp=15, "
        "or --gpus 480"
    )


def test_an_expert_group_that_cuts_a_tp_group_says_it_is_moesim_s_rule(capsys: pytest.CaptureFixture[str]) -> None:
    """TP 4 with EP 2 and ETP 1: Megatron-Core would fold the expert groups across TP groups; moesim lays them over
    whole ones, so the hint names the EP degrees of 4 or more that fit, in Megatron's flags (DeepSeek-V3 on 32 H100s
    at pp 2: 16 GPUs a stage, 256 experts: 4 and 8, nearest to 2 first)."""
    flags = (
        "--tensor-model-parallel-size 4 --expert-model-parallel-size 2 --expert-tensor-parallel-size 1 "
        "--pipeline-model-parallel-size 2 --global-batch-size 256 --seq-length 4096 --bf16 --moe-grouped-gemm"
    )
    model = ["--model", "examples/models/deepseek-v3.json", "--cluster", "h100", "--gpus", "32"]
    assert main(["run", *model, "--megatron-args", flags]) == 2
    assert capsys.readouterr().err.endswith(
        "EP 2 x ETP 1 = 2 is not a multiple of intra_size 4: moesim lays each expert group over whole TP/SP groups; "
        "try --expert-model-parallel-size 4 or 8\n"
    )
