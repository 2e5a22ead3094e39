"""Hidden and attention dropout (ModelSpec.hidden_dropout / attention_dropout): where they come from and what each
costs, checked by hand against the recipe's bytes, the attention kernel's measured slowdown and the saved masks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.costs.attention_cost import attention_op_efficiency
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.memory.activations import local_tokens, megatron_layer_bytes
from simulator.memory.per_gpu import megascale_layer_bytes
from topologies.errors import ConfigError
from topologies.hardware import GpuGeneration
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_model import flags_model
from workloads.inputs.yaml_files import load_model
from workloads.ops import AttentionShape
from workloads.recipes.residual import residual_step
from workloads.specs.layouts import LayoutSpec, layout_preset
from workloads.specs.models import ModelSpec, model_preset

DENSE = ModelSpec("d", 4, 1024, 8, 8, 0, 0, 0, 1024, dense_ffn_size=4096)
MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
FLAGS = "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --vocab-size 1024 --seq-length 1024"


def test_the_bias_dropout_add_writes_a_mask_and_its_backward_applies_it() -> None:
    """1,000 B of BF16 activation = 500 elements, a 500 B bool mask. Forward: residual and branch read, the sum
    written (3,000 B) and the mask written (500 B). Backward: the branch's gradient read and written (2,000 B) with
    the mask read (500 B), beside the input-gradient sum (3,000 B) where the step charges it."""
    plain, masked = residual_step("r", 1000.0), residual_step("r", 1000.0, dropout=0.1)
    assert (plain.mem_bytes, plain.bwd_kernels, plain.bwd_mem_bytes) == (3000.0, 1, 3000.0)
    assert (masked.mem_bytes, masked.bwd_kernels, masked.bwd_mem_bytes) == (3500.0, 2, 5500.0)
    alone = residual_step("r", 1000.0, backward=False, dropout=0.1)
    assert (alone.mem_bytes, alone.bwd_kernels, alone.bwd_mem_bytes) == (3500.0, 1, 2500.0)
    assert residual_step("r", 1000.0, backward=False).bwd_kernels == 0


@pytest.mark.parametrize(
    ("generation", "slowdown"),
    [(GpuGeneration.HOPPER, 0.614 / 0.594), (GpuGeneration.BLACKWELL_ULTRA, 0.525 / 0.480)],
)
def test_attention_dropout_slows_the_kernel_by_its_measured_ratio(generation, slowdown) -> None:
    """TransformerEngine #3312: cuDNN's fused attention, [s, b, h, d], p 0.1 against 0 (H200 0.614 / 0.594 ms,
    B300 0.525 / 0.480 ms), forward and backward alike."""
    shape = AttentionShape(128, 128, 4096, kernel="cudnn")
    for backward in (False, True):
        without = attention_op_efficiency(shape, backward, DEFAULT_CALIBRATION, generation)
        with_dropout = attention_op_efficiency(replace(shape, dropout=True), backward, DEFAULT_CALIBRATION, generation)
        assert without / with_dropout == pytest.approx(slowdown, rel=1e-12)


def test_the_masks_are_kept_between_the_tp_blocks() -> None:
    """Two masks a layer (after the attention and after the MLP), one byte per element of the hidden state: under
    TP 2 without sequence parallelism every rank keeps the whole sequence's, 2 x 1,024 B per token."""
    layout = LayoutSpec("tp2", attention="tp", ffn="tp", intra_size=2, sequence_parallel=False, recompute="none")
    tokens = local_tokens(layout, 1024)
    extra = megatron_layer_bytes(replace(DENSE, hidden_dropout=0.1), layout, 1024, True) - megatron_layer_bytes(
        DENSE, layout, 1024, True
    )
    assert extra == pytest.approx(tokens * 2 * 2 * 1024)
    full = layout.with_(recompute="full")  # only the layer's input is kept
    assert megatron_layer_bytes(replace(DENSE, hidden_dropout=0.1), full, 1024, True) == megatron_layer_bytes(
        DENSE, full, 1024, True
    )


def test_megatron_flags_set_dropout_and_a_flags_only_model_takes_megatrons_default() -> None:
    job = parse_megatron_args(FLAGS + " --hidden-dropout 0.05 --attention-dropout 0.0")
    assert job.model_overrides["hidden_dropout"] == 0.05
    run = job.resolve(DENSE)
    assert (run.model.hidden_dropout, run.model.attention_dropout) == (0.05, 0.0)
    # Megatron-LM's parser defaults both to 0.1; a --model keeps its own where no flag is given
    assert (flags_model(parse_megatron_args(FLAGS).args).hidden_dropout, DENSE.hidden_dropout) == (0.1, 0.0)
    assert parse_megatron_args(FLAGS).resolve(DENSE).model.attention_dropout == 0.0
    wrong = parse_megatron_args(FLAGS + " --hidden-dropout 1.5")
    with pytest.raises(ConfigError) as raised:
        wrong.resolve(DENSE)
    assert "--hidden-dropout" in str(wrong.explain(raised.value))


def test_a_config_json_gives_its_dropout(tmp_path) -> None:
    config = json.loads((MODELS / "qwen3-30b-a3b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "attention_dropout": 0.1, "hidden_dropout": 0.2}))
    model = load_model(path)
    assert (model.hidden_dropout, model.attention_dropout) == (0.2, 0.1)
    path.write_text(json.dumps({**config, "attention_dropout": 1.0}))
    with pytest.raises(ConfigError, match="attention_dropout"):
        load_model(path)
    assert load_model(MODELS / "gpt3-5b.yaml").hidden_dropout == 0.1  # NeMo's 5b.yaml


def test_megascale_s_formula_counts_the_masks_as_one_unit() -> None:
    """MegaScale-MoE's closed form (Sec. 4.1) in units of b s h / n BF16 bytes: two one-byte masks are one unit."""
    model, layout = model_preset("paper-352b"), layout_preset("megascale-moe")
    unit = layout.micro_batch * 4096 * model.hidden_size / (layout.intra_size * layout.cp) * 2
    extra = megascale_layer_bytes(replace(model, hidden_dropout=0.1), layout, 4096) - megascale_layer_bytes(
        model, layout, 4096
    )
    assert extra == pytest.approx(unit)
