"""Every validation rule: one line naming the field, exit status 2 from the CLI, ConfigError from the API."""

from __future__ import annotations

import pytest

from experiments.cli.main import main
from simulator.report.simulate import simulate
from topologies.errors import ConfigError
from workloads.specs.layouts import MEGASCALE_MOE, MEGATRON_LM
from workloads.specs.models import MODEL_PRESETS

M1 = MODEL_PRESETS["paper-352b"]

# (CLI arguments after `run`, the field the message must name)
CLI_CASES = [
    (["--model", "nope"], "model"),
    (["--layout", "nope"], "layout"),
    (["--cluster", "nope"], "cluster"),
    (["--gpus", "0"], "gpus"),
    (["--gpus", "-8"], "gpus"),
    (["--global-batch", "0"], "global_batch"),
    (["--seq-len", "-1"], "seq_len"),
    (["--micro-batch", "0"], "micro_batch"),  # refused by the flag's type, before the layout
    (["--gpus", "236"], "gpus"),  # not a multiple of the node size
    (["--gpus", "248"], "gpus"),  # nodes, but not intra_size x pp = 120
    (["--global-batch", "721"], "global_batch"),  # dp 2 x micro-batch 1
    (["--micro-batch", "7"], "global_batch"),  # 720 not divisible by dp 2 x 7
    (["--model", "deepseekmoe"], "layout.pp"),  # 28 layers, pp 15
]


@pytest.mark.parametrize("args, field", CLI_CASES)
def test_cli_one_line_exit_2(args: list[str], field: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"moesim: error: {field}: "), err


# (a thunk that builds the simulate arguments, the field the ConfigError must name)
API_CASES = [
    (
        lambda: (M1.with_(num_heads=36, num_kv_heads=4, hidden_size=4608), MEGASCALE_MOE.with_(pp=1), 8),
        "model.num_heads",
    ),
    (lambda: (M1.with_(num_experts=12), MEGASCALE_MOE.with_(pp=1), 8), "model.num_experts"),
    (lambda: (M1, MEGASCALE_MOE.with_(intra_size=16, pp=1), 16), "layout.intra_size"),  # EP beyond the node
    (lambda: (M1, MEGASCALE_MOE.with_(intra_size=3, pp=1), 24), "layout.intra_size"),  # does not divide 8
    (lambda: (M1, MEGASCALE_MOE.with_(pp=7), 56), "layout.pp"),  # 60 layers
    (lambda: (M1, MEGASCALE_MOE.with_(pp=3, schedule="interleaved", virtual_stages=8), 24), "layout.pp"),
    (lambda: (M1.with_(expert_ffn_size=14337), MEGATRON_LM.with_(pp=1), 8), "model.expert_ffn_size"),
    (lambda: (M1, MEGASCALE_MOE.with_(pp="15"), 240), "layout.pp"),
    (lambda: (M1.with_(top_k=2.0), MEGASCALE_MOE, 240), "model.top_k"),
    (lambda: (M1, MEGASCALE_MOE.with_(inter_op_overlap=1), 240), "layout.inter_op_overlap"),
    (lambda: (M1, "megascale-moe", "240"), "gpus"),
    (lambda: (3, "megascale-moe", 240), "model"),
]


@pytest.mark.parametrize("build, field", API_CASES)
def test_api_config_error(build, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        simulate(*build(), global_batch=8, seq_len=1024)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"global_batch": 0}, "global_batch"),
        ({"global_batch": True}, "global_batch"),
        ({"seq_len": -1}, "seq_len"),
        ({"seq_len": 1024.0}, "seq_len"),
        ({"micro_batch": 0}, "layout.micro_batch"),
    ],
)
def test_api_sizes(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        simulate("paper-352b", "megascale-moe", 240, **kwargs)
    assert info.value.field == field


def test_a_set_that_moves_the_blocks_of_a_split_job_says_where_to_change_them(capsys: pytest.CaptureFixture) -> None:
    """DeepSeek-V3's 61 layers over PP 4: --megatron-args splits them 15, 16, 15, 15 (one fewer on the last, then
    the first blocks); a --set of virtual stages then asks for 32 blocks of that split, and the refusal says the
    split was made for 4 and where to change them."""
    flags = "--pipeline-model-parallel-size 4 --expert-model-parallel-size 64 --global-batch-size 512 --seq-length 4096"
    model = ["--model", "examples/models/deepseek-v3.json", "--cluster", "h100", "--gpus", "256"]
    sets = ["--set", "virtual_stages=8", "--set", "schedule=interleaved"]
    assert main(["run", *model, "--megatron-args", flags + " --bf16 --moe-grouped-gemm", *sets]) == 2
    assert capsys.readouterr().err.endswith(
        "32 pipeline blocks, 61 in all; got (15, 16, 15, 15), a split into 4 blocks: change pp or virtual stages where "
        "the layers were split (--megatron-args or the layout), not with --set\n"
    )
