"""--cuda-graph-impl full_iteration (workloads/specs/cuda_graphs.py, workloads/inputs/megatron_graphs.py): Megatron's
rules in Megatron's words, every op of the step captured, no host sync inside the graph."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from experiments.cli.main import main
from simulator.costs.kernels import kernel_overhead_s
from simulator.streams.op_costs import launch_times_s
from tests.toys import toy_calibration, toy_gpu
from topologies.errors import ConfigError
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import HOST_SYNC, GraphPart, Role
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.validation import check_step

FULL = "--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad"
MODEL = ModelSpec("m", 2, 1024, 8, 8, 512, 8, 2, 64)
CAL = toy_calibration(host_launch_s=10e-6, kernel_overhead_s=4e-6, graph_kernel_overhead_s=1e-6)


def _scopes(flags: str) -> tuple[str, ...]:
    return parse_megatron_args(flags).layout_fields["cuda_graph_scope"]


def test_full_iteration_flags() -> None:
    """The new implementation, and the deprecated --cuda-graph-scope full_iteration that migrates to it from none or
    local (cuda_graph_config.py); --fp16 with dynamic loss scaling turns the NaN check off itself (validate_args)."""
    assert _scopes(FULL) == ("iteration",)
    assert _scopes("--cuda-graph-scope full_iteration --no-check-for-nan-in-loss-and-grad") == ("iteration",)
    assert _scopes("--cuda-graph-impl local --cuda-graph-modules full_iteration --no-check-for-nan-in-loss-and-grad")
    assert _scopes("--cuda-graph-impl full_iteration --fp16") == ("iteration",)
    full_recompute = "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
    assert _scopes(f"{FULL} {full_recompute}") == ("iteration",)


@pytest.mark.parametrize(
    ("flags", "flag", "words"),
    [
        ("--cuda-graph-impl full_iteration", "--no-check-for-nan-in-loss-and-grad", "should be set with"),
        (
            "--cuda-graph-impl full_iteration --fp16 --loss-scale 1024",
            "--no-check-for-nan-in-loss-and-grad",
            "should be",
        ),
        (f"{FULL} --cuda-graph-modules attn", "--cuda-graph-modules", "must be empty when --cuda-graph-impl"),
        (
            "--cuda-graph-impl transformer_engine --cuda-graph-modules full_iteration",
            "--cuda-graph-modules",
            "cannot be combined with cuda_graph_impl='transformer_engine'",
        ),
        (  # the deprecated spelling the user typed is the one the error names
            "--cuda-graph-impl transformer_engine --cuda-graph-scope full_iteration",
            "--cuda-graph-scope",
            "cannot be combined with cuda_graph_impl='transformer_engine'",
        ),
        (f"{FULL} --cuda-graph-scope attn", "--cuda-graph-scope", "--cuda-graph-scope must be empty when"),
        (
            "--cuda-graph-impl local --recompute-granularity full --recompute-method block --recompute-num-layers 1",
            "--recompute-granularity",
            "full recompute is only supported with full iteration CUDA graph",
        ),
    ],
)
def test_megatron_rules_in_megatron_words(flags: str, flag: str, words: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_megatron_args(flags)
    assert error.value.field == flag and words in error.value.rule


def test_every_op_of_the_step_is_captured() -> None:
    """Under "iteration" every op of a layer's forward and backward, embedding and head included, replays from the
    graph: each kernel pays the graph's fixed time, and a layer's run of ops one host launch per direction."""
    layout = LayoutSpec("t", intra_size=1, ffn="ep", cuda_graph_scope=("iteration",))
    steps = layer_recipe(MODEL, layout, 1024, 8)
    ops = forward_ops([(0, steps), (1, steps)], layout) + backward_ops([(0, steps), (1, steps)], layout)
    assert ops and all(op.graph == GraphPart.ITERATION for op in ops)
    assert {kernel_overhead_s(op, CAL) for op in ops} == {1e-6}
    keys = [(op.layer, op.role in (Role.INPUT_GRAD, Role.WEIGHT_GRAD)) for op in ops]
    runs = 1 + sum(key != previous for previous, key in pairwise(keys))  # forward 0, 1; backward 1, 0 (+ SAR)
    assert 4 <= runs <= 5
    assert sum(launch_times_s(tuple(ops), CAL, toy_gpu())) == pytest.approx(runs * 10e-6)


def test_scope_stands_alone() -> None:
    with pytest.raises(ConfigError, match="stands alone"):
        LayoutSpec("t", cuda_graph_scope=("iteration", "attn"))


def test_no_host_sync_inside_the_graph() -> None:
    """A dropless MoE layer copies its token counts to the host: the full-iteration graph cannot hold that, and the
    refusal names the Megatron flags that give static shapes. Padding to capacity or a static per-rank budget
    removes the sync and the step runs."""
    layout = LayoutSpec(
        "t", intra_size=1, pp=1, ffn="ep", cuda_graph_scope=("iteration",), host_sync_per_moe_layer=True
    )
    assert any(step.kind == HOST_SYNC for step in layer_recipe(MODEL, layout, 1024, 8))
    with pytest.raises(ConfigError) as error:
        check_step(MODEL, layout, 8, 8, 64, 1024)
    assert error.value.field == "layout.host_sync_per_moe_layer"
    assert "--moe-expert-rank-capacity-factor" in error.value.rule and "--moe-pad-expert-input-to-capacity" in (
        error.value.rule
    )
    check_step(MODEL, layout.with_(host_sync_per_moe_layer=False), 8, 8, 64, 1024)


@pytest.mark.parametrize(
    ("flags", "sync"),
    [
        ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep", True),
        (
            (
                "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
                "--moe-expert-rank-capacity-factor 1.5 --use-transformer-engine-op-fuser"
            ),
            False,
        ),
        (
            "--moe-token-dispatcher-type alltoall --moe-expert-capacity-factor 1 --moe-pad-expert-input-to-capacity",
            False,
        ),
        (
            (
                "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
                "--moe-expert-capacity-factor 1.1 --moe-pad-expert-input-to-capacity"
            ),
            False,
        ),
        (
            "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-expert-capacity-factor 1.1",
            True,
        ),
    ],
)
def test_static_shapes_remove_the_sync(flags: str, sync: bool) -> None:
    assert parse_megatron_args(flags).layout_fields["host_sync_per_moe_layer"] is sync


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        ("--moe-expert-rank-capacity-factor 1", "requires moe_flex_dispatcher_backend to be 'hybridep' or 'ncclep'"),
        (
            "--moe-flex-dispatcher-backend hybridep --moe-expert-rank-capacity-factor 1",
            "requires use_transformer_engine_op_fuser=True or moe_use_grouped_tensor=True",
        ),
        (
            "--moe-flex-dispatcher-backend ncclep --moe-expert-rank-capacity-factor 1 --use-transformer-engine-op-fuser",
            "requires BOTH use_transformer_engine_op_fuser and moe_grouped_gemm",
        ),
    ],
)
def test_rank_capacity_rules(flags: str, words: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_megatron_args(flags)
    assert words in error.value.rule


def test_cli_refuses_a_dropless_full_iteration_job_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    args = f"--expert-model-parallel-size 8 --bf16 --use-distributed-optimizer {FULL}"
    assert main(["run", "--model", "mixtral-8x7b", "--cluster", "h100", "--gpus", "8", "--megatron-args", args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--moe-expert-rank-capacity-factor" in err[0]


def test_full_iteration_saves_what_the_per_layer_graphs_leave_eager(capsys: pytest.CaptureFixture[str]) -> None:
    """Differential, one job three ways (static shapes, so the MoE part can be captured): eager >= per-layer
    attention graphs >= the whole step in one graph, and the last is strictly faster than eager."""
    base = (
        "--tensor-model-parallel-size 1 --expert-model-parallel-size 8 --micro-batch-size 1 --global-batch-size 16 "
        "--seq-length 1024 --bf16 --swiglu --moe-grouped-gemm --use-distributed-optimizer --num-layers 2 "
        "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
        "--moe-expert-rank-capacity-factor 1.5 --use-transformer-engine-op-fuser"
    )
    times = []
    for extra in ("", "--cuda-graph-impl transformer_engine --cuda-graph-modules attn", FULL):
        run = ["run", "--model", "examples/models/qwen3-30b-a3b.json", "--cluster", "h100", "--gpus", "8", "--json"]
        assert main([*run, "--megatron-args", f"{base} {extra}"]) == 0
        times.append(json.loads(capsys.readouterr().out)["step_time_s"])
    assert times[0] >= times[1] >= times[2] and times[2] < times[0]
