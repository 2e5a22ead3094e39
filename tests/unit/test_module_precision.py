"""Per-module GEMM precision (Megatron-LM's --te-precision-config-file; layout module_precisions): ordered glob rules
over Megatron-Core's module names pick a quantized linear layer's recipe; each overridden GEMM is quantized by its own
recipe, a BF16 one not at all; the BF16 first / last layers are left alone. Hand-checked on the op lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.report.simulate import prepare
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import GEMM, GemmPrecision
from workloads.schedules.base import FORWARD
from workloads.schedules.pipeline_tasks import TaskKey
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.module_precision import module_overrides

# 4 layers, hidden 1,024, 8 query heads of 128 in 2 KV groups, SwiGLU 4,096
DENSE = ModelSpec("d", 4, 1024, 8, 2, 0, 0, 0, 1024, dense_ffn_size=4096, rope=True)
NVFP4 = LayoutSpec(
    "t", attention="tp", ffn="tp", intra_size=1, pp=1, recompute="none", gemm_dtype="fp8", fp8_recipe="nvfp4"
)
RULES = ("*.linear_qkv=bf16", "decoder.layers.*.mlp.linear_fc2=mxfp8", "*.linear_fc2=bf16")


def forward(layout: LayoutSpec) -> dict[int, dict[str, object]]:
    """The forward ops of the one block, by layer and by name (a GEMM fused with its TP collective by its GEMM's)."""
    workload = StepWorkload(DENSE, layout, 8, 8, 8, 1024)
    layers: dict[int, dict[str, object]] = {}
    for op in workload.task_ops(TaskKey(FORWARD, (workload.block_key(0),))):
        layers.setdefault(op.layer, {})[op.name.split("+")[0]] = op
    return layers


def test_the_first_matching_rule_names_the_recipe() -> None:
    overrides = dict(module_overrides(RULES, "decoder.layers.2."))
    assert (overrides["qkv_proj"], overrides["dense_fc2"]) == ("bf16", "mxfp8")  # fc2: the earlier rule wins
    assert overrides["expert_fc2"] == "bf16" and "o_proj" not in overrides  # mlp.experts.linear_fc2: the later one
    assert dict(module_overrides(("mtp.*=bf16",), "mtp.layers.0.mtp_model_layer.")).keys() >= {"qkv_proj", "dense_fc13"}
    assert module_overrides(("mtp.*=bf16",), "decoder.layers.2.") == ()
    with pytest.raises(ConfigError, match="PATTERN=RECIPE"):
        StepWorkload(DENSE, NVFP4.with_(module_precisions=("*.linear_qkv=fp16",)), 8, 8, 8, 1024)


def test_overridden_gemms_take_their_recipe_and_its_quantization() -> None:
    layers = forward(NVFP4.with_(module_precisions=RULES, bf16_last_layers=1))
    for layer in range(3):
        ops = layers[layer]
        assert ops["qkv_proj"].gemm.precision == GemmPrecision.BF16 and "qkv_proj.quant" not in ops
        assert ops["dense_fc2"].gemm.precision == GemmPrecision.FP8_MXFP8
        # MXFP8's one cast kernel, 2 B read and 2 x (1 + 1/32) written per element, where NVFP4 runs 2 kernels
        fc2 = ops["dense_fc2"].gemm
        assert ops["dense_fc2.quant"].kernels == 1
        assert ops["dense_fc2.quant"].mem_bytes == pytest.approx(fc2.m * fc2.k * (2 + 2 * (1 + 1 / 32)))
        assert ops["o_proj"].gemm.precision == GemmPrecision.NVFP4 and ops["o_proj.quant"].kernels == 2
    # the last layer is BF16 (--first-last-layers-bf16) whatever the rules say
    assert {op.gemm.precision for op in layers[3].values() if op.kind == GEMM} == {GemmPrecision.BF16}


def test_megatron_reads_the_config_file_and_refuses_fp4_without_fp4_cores(tmp_path: Path) -> None:
    (tmp_path / "precision.yaml").write_text(
        "configs:\n"
        "  bf16: {transformer_engine_config_type: TEQuantizationParams, training_recipe: {}}\n"
        "  mx: {transformer_engine_config_type: TEQuantizationParams, training_recipe: {fp8_quantization_recipe: mxfp8}}\n"
        "matchers:\n"
        "  qkv: {config: bf16, type: glob, pattern: '*.linear_qkv', enabled: true}\n"
        "  off: {config: mx, type: glob, pattern: '*.linear_proj', enabled: false}\n"
        "  fc2: {config: mx, type: glob, pattern: '*.linear_fc2', enabled: true}\n"
    )
    flags = tmp_path / "job.sh"
    flags.write_text(
        "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 "
        "--micro-batch-size 1 --global-batch-size 8 --vocab-size 1024 --bf16 --fp4-format e2m1 "
        "--te-precision-config-file precision.yaml\n"
    )
    layout = parse_megatron_args(flags).resolve(DENSE).layout
    assert layout.module_precisions == ("*.linear_qkv=bf16", "*.linear_fc2=mxfp8")  # in order, the disabled left out
    inline = flags.read_text().replace("precision.yaml", str(tmp_path / "precision.yaml")).strip()
    long = "--hidden-dropout 0.0 " * 300 + inline  # inline flags too long to name a file: no path beside them
    assert parse_megatron_args(long).resolve(DENSE).layout.module_precisions == layout.module_precisions
    (tmp_path / "bad.yaml").write_text("configs: {}\nmatchers:\n  m: {config: x, type: regex, pattern: '.*'}\n")
    with pytest.raises(ConfigError, match="glob matchers"):
        parse_megatron_args(str(flags.read_text()).replace("precision.yaml", str(tmp_path / "bad.yaml")))
    rule = NVFP4.with_(fp8_recipe="mxfp8", module_precisions=("*.linear_fc2=nvfp4",))
    with pytest.raises(ConfigError, match="FP4 tensor cores"):
        prepare(DENSE, rule, 8, "h100", 8, 1024, None, True)
