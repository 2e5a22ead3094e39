"""Plain MLPs (GeLU, squared ReLU: FC1 as wide as FC2's input, two matrices) beside the gated SwiGLU (three): the
model's parameters, the GEMMs and activation kernels of its recipe, the tensors it saves, Megatron's FLOP count
and the flags and config.json keys that choose it (ModelSpec.ffn_activation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.cli.main import main
from simulator.memory.activations import layer_saved
from simulator.report.megatron_flops import megatron_args, megatron_flops
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model
from workloads.ops import Module
from workloads.recipes.activation import activation_step
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
DENSE = ModelSpec("d", 2, 1024, 8, 8, 0, 0, 0, 64, dense_ffn_size=4096)
MOE = ModelSpec("m", 1, 1024, 8, 8, 512, 8, 2, 64, num_shared_experts=1)
LAYOUT = LayoutSpec("t", intra_size=2, ffn="ep", intra_op_overlap=False)
# GPT-3 175B (Brown et al. 2020, Table 2.1): 96 layers, width 12,288, 96 heads, FFN 4 x 12,288, GeLU; GPT-2's
# 50,257-token vocabulary (NeMo-Framework-Launcher conf/training/gpt3/175b.yaml: GPT2BPETokenizer)
GPT3 = ModelSpec("gpt3-175b", 96, 12288, 96, 96, 0, 0, 0, 50257, dense_ffn_size=49152, ffn_activation="gelu")


def _gemm(model: ModelSpec, name: str):
    (step,) = [s for s in layer_recipe(model, LAYOUT, 1024, 8, dense=not model.num_experts) if s.name == name]
    return step.gemm


def test_a_plain_mlp_has_two_matrices_and_fc1_one_ffn_wide() -> None:
    gelu = DENSE.with_(ffn_activation="gelu")
    assert DENSE.layer_parts(True).dense_ffn == 3 * 1024 * 4096
    assert gelu.layer_parts(True).dense_ffn == 2 * 1024 * 4096
    # a replicated dense FFN (SP attention): FC1 writes 2 x 4,096 columns for SwiGLU, 4,096 for GeLU; FC2 reads 4,096
    assert (_gemm(DENSE, "dense_fc13").n, _gemm(gelu, "dense_fc13").n) == (8192, 4096)
    assert _gemm(DENSE, "dense_fc2").k == _gemm(gelu, "dense_fc2").k == 4096
    relu2 = MOE.with_(ffn_activation="squared_relu")
    assert relu2.expert_params == 2 * 1024 * 512 and relu2.shared_params == 2 * 1024 * 512
    assert (_gemm(MOE, "expert_fc13").n, _gemm(relu2, "expert_fc13").n) == (1024, 512)
    assert (_gemm(MOE, "shared_fc13").n, _gemm(relu2, "shared_fc13").n) == (1024, 512)


def test_the_plain_activation_reads_its_input_and_writes_its_output() -> None:
    """1,000 BF16 outputs: one kernel reads 2 kB and writes 2 kB; backward reads the gradient and the input and writes
    the input's gradient (6 kB). An expert's eager probs product adds 1 + 1 passes forward, 6 backward, in 1 and 3
    kernels; the weighted fused kernel applies the probs itself."""
    dense = activation_step("a", 1000, gated=False, fused=True, probs=False, module=Module.MLP)
    assert (dense.mem_bytes, dense.kernels, dense.bwd_mem_bytes, dense.bwd_kernels) == (4000, 1, 6000, 1)
    eager = activation_step("a", 1000, gated=False, fused=False, probs=True, module=Module.MOE_ACT, launches=2)
    assert (eager.mem_bytes, eager.kernels, eager.bwd_mem_bytes, eager.bwd_kernels) == (8000, 4, 18000, 8)
    fused = activation_step("a", 1000, gated=False, fused=True, probs=True, module=Module.MOE_ACT)
    assert (fused.mem_bytes, fused.kernels) == (4000, 1)


def test_fc1s_saved_output_is_one_ffn_wide() -> None:
    def saved(model: ModelSpec, name: str) -> float:
        return sum(s.bytes_per_token for s in layer_saved(model, LAYOUT, dense=not model.num_experts) if s.name == name)

    assert saved(DENSE.with_(ffn_activation="gelu"), "mlp_fc1_output") == saved(DENSE, "mlp_fc1_output") / 2
    assert saved(MOE.with_(ffn_activation="gelu"), "expert_fc1_output") == saved(MOE, "expert_fc1_output") / 2


def test_megatron_counts_gpt3_175b_as_nemos_table_does() -> None:
    """NVIDIA/NeMo docs/source/performance/performance_summary.md (NeMo 24.07, DGX-H100, FP8): GPT3-175B at 726
    tokens/s/GPU prints 782 model TFLOP/s/GPU. Megatron's count (two FFN GEMMs without --swiglu) gives 770: its
    core attention counts the causal half of s^2, the table's formula (Korthikanti et al. 2023, App. A) the whole;
    with SwiGLU's three GEMMs it would be 1,029."""
    layout = LayoutSpec("t", intra_size=4, ffn="tp", pp=8)
    per_token = megatron_flops(megatron_args(GPT3, layout), 1, 2048) / 2048
    assert 726 * per_token / 1e12 == pytest.approx(782, rel=0.02)
    swiglu = megatron_flops(megatron_args(GPT3.with_(ffn_activation="swiglu"), layout), 1, 2048) / 2048
    assert 726 * swiglu / 1e12 > 1000


def test_megatron_flags_choose_the_activation() -> None:
    size = "--num-layers 2 --hidden-size 64 --num-attention-heads 4"
    assert parse_megatron_args(f"{size} --swiglu").model_overrides["ffn_activation"] == "swiglu"
    assert parse_megatron_args(f"{size} --squared-relu").model_overrides["ffn_activation"] == "squared_relu"
    assert parse_megatron_args(size).model_overrides["ffn_activation"] == "gelu"  # Megatron's default
    # parallel flags over a model file keep the model's own FFN, and say what Megatron would do
    job = parse_megatron_args("--tensor-model-parallel-size 2")
    assert "ffn_activation" not in job.model_overrides
    assert any("GeLU" in note for note in job.resolve(DENSE).notes)
    assert not any("GeLU" in note for note in job.resolve(DENSE.with_(ffn_activation="gelu")).notes)
    # the GeLU's fusion flag without --swiglu, off without biases (Megatron's validate_args)
    assert parse_megatron_args(size).layout_fields["fused_activation"] is True
    assert parse_megatron_args(f"{size} --disable-bias-linear").layout_fields["fused_activation"] is False
    assert parse_megatron_args(f"{size} --swiglu --disable-bias-linear").layout_fields["fused_activation"] is True


def test_nemotron_4_340b_config_counts_the_published_parameters() -> None:
    """Nemotron-4 340B report (arXiv 2406.11704) Sec. 2.1: 9.4B embedding and 331.6B non-embedding parameters."""
    model = load_model(MODELS / "nemotron-4-340b.json")
    assert model.ffn_activation == "squared_relu"
    assert model.embedding_params == pytest.approx(9.4e9, rel=0.01)
    assert model.total_params - model.embedding_params == pytest.approx(331.6e9, rel=0.001)


def test_the_gpt3_example_runs_a_gelu_mlp(capsys) -> None:
    """examples/megatron/nemo-gpt3-175b-h100-128.sh over examples/models/gpt3-175b.yaml: the flags keep the model's
    GeLU (no note that Megatron would run one) and the job simulates."""
    examples = MODELS.parent
    argv = ["run", "--model", str(MODELS / "gpt3-175b.yaml"), "--cluster", "h100", "--gpus", "128", "--json"]
    assert main([*argv, "--megatron-args", str(examples / "megatron" / "nemo-gpt3-175b-h100-128.sh")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "gpt3-175b" and report["tokens_per_s_per_gpu"] > 0
    assert not any("GeLU" in note for note in report["megatron_notes"])
