"""Megatron's --first-last-layers-bf16 (layout bf16_first_layers / bf16_last_layers): those layers of an FP8 / FP4 run
keep BF16 GEMMs and run no quantization kernel; the others are untouched. Hand-checked on the op lists."""

from __future__ import annotations

from dataclasses import replace

import pytest

from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import GEMM, GemmPrecision
from workloads.schedules.base import FORWARD
from workloads.schedules.pipeline_tasks import TaskKey
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

# 4 layers, hidden 1,024, 8 query heads of 128 in 2 KV groups, SwiGLU 4,096
DENSE = ModelSpec("d", 4, 1024, 8, 2, 0, 0, 0, 1024, dense_ffn_size=4096, rope=True)
MXFP8 = LayoutSpec(
    "t", attention="tp", ffn="tp", intra_size=1, pp=1, recompute="none", gemm_dtype="fp8", fp8_recipe="mxfp8"
)
FLAGS = (
    "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 "
    "--micro-batch-size 1 --global-batch-size 8 --vocab-size 1024 --bf16 --fp8-format e4m3 --fp8-recipe mxfp8 "
)


def forward_by_layer(layout: LayoutSpec) -> dict[int, list]:
    """The forward ops of the one pipeline block, by layer index (-1 the embedding, 4 the head)."""
    workload = StepWorkload(DENSE, layout, 8, 8, 8, 1024)
    ops = workload.task_ops(TaskKey(FORWARD, (workload.block_key(0),)))
    layers: dict[int, list] = {}
    for op in ops:
        layers.setdefault(op.layer, []).append(op)
    return layers


def test_the_first_and_last_layers_run_bf16_gemms_and_no_quantization() -> None:
    layers = forward_by_layer(MXFP8.with_(bf16_first_layers=1, bf16_last_layers=1))
    reference = forward_by_layer(MXFP8)
    for layer in range(4):
        precisions = {op.gemm.precision for op in layers[layer] if op.kind == GEMM}
        quantizations = [op for op in layers[layer] if op.name.endswith(".quant")]
        if layer in (0, 3):
            assert precisions == {GemmPrecision.BF16} and not quantizations, layer
            assert len(layers[layer]) == len([op for op in reference[layer] if not op.name.endswith(".quant")])
        else:
            assert precisions == {GemmPrecision.FP8_MXFP8} and quantizations, layer
            # the FP8 layers are the plain run's (their dependencies index a shorter list)
            assert [replace(op, deps=()) for op in layers[layer]] == [replace(op, deps=()) for op in reference[layer]]
    # FLOPs are the same GEMMs either way
    for layer in range(4):
        flops = [sum(op.flops for op in ops if op.kind == GEMM) for ops in (layers[layer], reference[layer])]
        assert flops[0] == flops[1]


def test_megatron_flags_and_their_rules() -> None:
    def layout(flags: str) -> LayoutSpec:
        return parse_megatron_args(FLAGS + flags).resolve(DENSE).layout

    default = layout("--first-last-layers-bf16")  # Megatron-Core's defaults: one layer at each end
    assert (default.bf16_first_layers, default.bf16_last_layers) == (1, 1)
    bridge = layout("--first-last-layers-bf16 --num-layers-at-start-in-bf16 0 --num-layers-at-end-in-bf16 2")
    assert (bridge.bf16_first_layers, bridge.bf16_last_layers) == (0, 2)
    assert (layout("").bf16_first_layers, layout("").bf16_last_layers) == (0, 0)
    with pytest.raises(ConfigError, match="Delayed scaling"):
        parse_megatron_args(FLAGS.replace("mxfp8", "delayed") + "--first-last-layers-bf16").resolve(DENSE)
    with pytest.raises(ConfigError, match="bf16_last_layers"):
        StepWorkload(DENSE, MXFP8.with_(bf16_last_layers=5), 8, 8, 8, 1024)


def test_a_bf16_layer_saves_bf16_gemm_inputs() -> None:
    """Activations: the BF16 layers keep their GEMM inputs in BF16, the FP8 layers (MXFP8: 1 byte and a scale per
    32) as before, so the stage holds more, and each BF16 layer exactly what the layer of a BF16 run holds."""
    from simulator.memory.per_gpu import block_layer_bytes

    mixed = StepWorkload(DENSE, MXFP8.with_(bf16_first_layers=1, bf16_last_layers=1), 8, 8, 8, 1024)
    fp8 = StepWorkload(DENSE, MXFP8, 8, 8, 8, 1024)
    bf16 = StepWorkload(DENSE, MXFP8.with_(gemm_dtype="bf16", fp8_recipe=""), 8, 8, 8, 1024)
    sizes = [block_layer_bytes(w, range(4)) for w in (mixed, fp8, bf16)]
    assert sizes[0] == [sizes[2][0], sizes[1][1], sizes[1][2], sizes[2][3]]
    assert sizes[2][0] > sizes[1][0]
