"""FSDP's sharding (workloads/inputs/megatron_fsdp.py, simulator.memory.per_gpu.sharded_unit_bytes): Megatron FSDP's
strategies as ZeRO stages, FSDP2's rules in Megatron's words, the double-buffered units by hand, and Megatron-LM's
own FSDP example fitting where the flags used to be ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.memory.per_gpu import sharded_unit_bytes, stage_memory
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

LLAMA = load_model(Path(__file__).resolve().parents[2] / "examples" / "models" / "llama-3.1-8b.json")


@pytest.mark.parametrize(
    ("strategy", "zero"), [("", 3), ("no_shard", 0), ("optim", 1), ("optim_grads", 2), ("optim_grads_params", 3)]
)
def test_strategies_are_zero_stages(strategy: str, zero: int) -> None:
    flags = "--use-megatron-fsdp" + (f" --data-parallel-sharding-strategy {strategy}" if strategy else "")
    job = parse_megatron_args(flags)
    assert job.layout_fields["zero_stage"] == zero
    assert any("timed: " in note for note in job.notes)  # how its communication is timed is said


def test_without_fsdp_the_strategy_does_nothing() -> None:
    job = parse_megatron_args("--use-distributed-optimizer --data-parallel-sharding-strategy optim_grads")
    assert job.layout_fields["zero_stage"] == 1 and any("no effect" in note for note in job.notes)


FSDP2 = "--use-torch-fsdp2 --no-gradient-accumulation-fusion --untie-embeddings-and-output-weights"


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (FSDP2 + " --pipeline-model-parallel-size 2", "not supported with pipeline parallelism"),
        (FSDP2 + " --expert-model-parallel-size 2", "not supported with expert parallelism"),
        (FSDP2 + " --use-distributed-optimizer", "not supported with MCore's distributed optimizer"),
        ("--use-torch-fsdp2 --untie-embeddings-and-output-weights", "not supported with gradient accumulation fusion"),
        ("--use-torch-fsdp2 --no-gradient-accumulation-fusion", "requires --untie-embeddings-and-output-weights"),
    ],
)
def test_fsdp2_rules(flags: str, words: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_megatron_args(flags)
    assert error.value.field == "--use-torch-fsdp2" and words in error.value.rule


def test_an_fsdp2_job_with_ep_is_told_the_flags_that_give_its_sharding() -> None:
    """Megatron-LM refuses FSDP2 with EP or PP; PyTorch-native stacks run it, so the refusal names the Megatron FSDP
    flags that give the same sharding, and those run with EP."""
    with pytest.raises(ConfigError) as error:
        parse_megatron_args(FSDP2 + " --expert-model-parallel-size 2")
    assert error.value.rule.endswith(
        "give --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params instead)"
    )
    route = parse_megatron_args(
        "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --expert-model-parallel-size 2"
    )
    assert route.layout_fields["zero_stage"] == 3 == parse_megatron_args(FSDP2).layout_fields["zero_stage"]


def test_fsdp2_shards_everything() -> None:
    assert parse_megatron_args(FSDP2).layout_fields["zero_stage"] == 3


def test_double_buffered_units_by_hand() -> None:
    """A dense toy layer (h 1024, 8 heads of 128, 4 KV heads; SwiGLU 4096) under TP 2: attention 1024 x (1024 +
    2 x 512) + 1024 x 1024 and the MLP 3 x 1024 x 4096, halved by TP, plus two RMSNorms of 1024; two units of FP32
    gradients under ZeRO-2, and of BF16 weights besides under ZeRO-3; nothing under ZeRO-1."""
    model = ModelSpec("toy", 2, 1024, 8, 4, 0, 0, 0, vocab_size=1024, dense_ffn_size=4096)
    unit = (1024 * 2048 + 1024 * 1024 + 3 * 1024 * 4096) / 2 + 2 * 1024
    assert model.layer_parts(True).norms == 2 * 1024  # the norms as moesim counts them
    for zero, per_param in ((1, 0), (2, 4), (3, 6)):
        layout = LayoutSpec("t", attention="tp", ffn="tp", intra_size=2, pp=1, zero_stage=zero, recompute="none")
        workload = StepWorkload(model, layout, 4, 4, 8, 1024)
        assert sharded_unit_bytes(workload, 0) == 2 * unit * per_param
        assert stage_memory(workload, 0).buffers_bytes >= 2 * unit * per_param


def test_megatron_s_fsdp_example_fits() -> None:
    """Megatron-LM's examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh (d98e8a64dd) on 8 H100s, its flags as
    the script has them (the sharding part): with FSDP's ZeRO-3 within 80 GB, as ZeRO-1 (FSDP ignored) over it."""
    flags = (
        "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention "
        "--num-query-groups 8 --kv-channels 128 --seq-length 8192 --swiglu --untie-embeddings-and-output-weights "
        "--micro-batch-size 1 --global-batch-size 128 --bf16 --fp8-format hybrid --fp8-param-gather "
        "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --use-distributed-optimizer "
        "--overlap-grad-reduce --overlap-param-gather --vocab-size 128256"
    )
    run = parse_megatron_args(flags).resolve(LLAMA, num_gpus=8)
    assert run.layout.zero_stage == 3

    def peak(layout) -> float:
        return stage_memory(StepWorkload(run.model, layout, 8, 8, 128, 8192), 0).total_bytes

    assert run.layout.main_grads_dtype == "bf16"  # Megatron FSDP's "auto": the BF16 weights' dtype
    # as the distributed optimizer (FSDP ignored) would run it: ZeRO-1 with FP32 main gradients
    assert peak(run.layout) < 80e9 < peak(run.layout.with_(zero_stage=1, main_grads_dtype="fp32"))
