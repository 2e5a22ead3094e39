"""The SwiGLU between an FFN's GEMMs (workloads/recipes/activation.py): one fused kernel, or Megatron-Core's eager ops
under --no-bias-swiglu-fusion, counted kernel by kernel, in the steps and in the ops the engine runs."""

from __future__ import annotations

from simulator.memory.activations import layer_saved
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import MEMORY_BACKWARD_FACTOR, Module
from workloads.recipes.activation import activation_step
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

MOE = ModelSpec("m", 1, 1024, 8, 8, 512, 8, 2, 64)  # hidden 1024, 8 experts of width 512, top-2


def test_fused_swiglu_reads_two_halves_and_writes_one() -> None:
    """1,000 outputs of BF16: the gate and linear halves read (4 kB), the product written (2 kB), one kernel;
    its backward keeps the generic factor."""
    step = activation_step("s", 1000, gated=True, fused=True, probs=True, module=Module.MOE_ACT)
    assert (step.mem_bytes, step.kernels, step.bwd_mem_bytes, step.bwd_kernels) == (6000, 1, None, None)


def test_eager_swiglu_counts_megatron_cores_kernels() -> None:
    """Per BF16 output element (2 B), dense: silu 1 + 1, the offset add 1 + 1, the product 2 + 1 = 7 passes in
    3 kernels; backward the product's two gradients 3 + 3, silu's 3, the cat 4 = 13 in 4. Experts add the probs
    product: 1 + 1 forward (9 in 4); backward its input gradient 2, the probs gradient's product 3 and row sum 1
    (19 in 7). Each local expert's MLP on its own (SequentialMLP, 4 experts) launches them 4 times."""
    dense = activation_step("s", 1000, gated=True, fused=False, probs=False, module=Module.MLP)
    assert (dense.mem_bytes, dense.kernels, dense.bwd_mem_bytes, dense.bwd_kernels) == (14000, 3, 26000, 4)
    expert = activation_step("s", 1000, gated=True, fused=False, probs=True, module=Module.MOE_ACT, launches=4)
    assert (expert.mem_bytes, expert.kernels, expert.bwd_mem_bytes, expert.bwd_kernels) == (18000, 16, 38000, 28)


def test_megatron_flag_turns_the_fusion_off() -> None:
    """Megatron-LM's command line fuses by default; --no-bias-swiglu-fusion runs the eager ops."""
    assert parse_megatron_args("--num-layers 2").layout_fields["fused_activation"] is True
    assert parse_megatron_args("--no-bias-swiglu-fusion").layout_fields["fused_activation"] is False


def _swiglu_ops(fused: bool):
    layout = LayoutSpec("t", intra_size=2, ffn="ep", intra_op_overlap=False, fused_activation=fused)
    layers = [(0, layer_recipe(MOE, layout, 1024, 8))]
    fwd = forward_ops(layers, layout)
    (fc13,) = [op.gemm for op in fwd if op.name == "expert_fc13"]
    outputs = fc13.m * fc13.groups * fc13.n // 2  # the FC1 output's gate half: the activation's output
    swiglu = [op for op in fwd if op.name == "swiglu"]
    return outputs, swiglu, [op for op in backward_ops(layers, layout) if op.name.startswith("swiglu")]


def test_engine_ops_carry_the_backward_bytes() -> None:
    """EP 2 of 8 experts (4 local): per output of the activation (the expert rows x width 512 the FC1 GEMM
    makes), eager 9 passes forward and 19 backward of 2 B; fused 3 and 3 x MEMORY_BACKWARD_FACTOR."""
    outputs, (eager_fwd,), (eager_bwd,) = _swiglu_ops(False)
    assert outputs % 512 == 0 and outputs >= 1024 * 512  # 512 tokens per GPU at top-2, 1,024 routed rows or more
    assert (eager_fwd.mem_bytes, eager_fwd.kernels) == (18 * outputs, 4)
    assert (eager_bwd.mem_bytes, eager_bwd.kernels) == (38 * outputs, 7)
    _, (fused_fwd,), (fused_bwd,) = _swiglu_ops(True)
    assert (fused_fwd.mem_bytes, fused_bwd.mem_bytes) == (6 * outputs, MEMORY_BACKWARD_FACTOR * 6 * outputs)


def test_eager_swiglu_keeps_its_factors_for_backward() -> None:
    """Differential on the saved tensors per local token: the eager experts' SwiGLU keeps 3 more BF16 tensors of
    the output's size per routed copy (silu's output, the offset linear half, the product before the probs), a
    dense MLP's 2; everything else is the same. Top-2 of width 512, capacity-padded buffers (factor 1.25 by
    default): 2 x 1.25 x 3 x 2 B x 512 = 7,680 B; a dense MLP of width 4,096: 2 x 2 B x 4,096 = 16,384 B."""
    fused = LayoutSpec("t", intra_size=2, ffn="ep", capacity_factor=1.25)
    eager = fused.with_(fused_activation=False)
    assert not fused.dropless
    extra = {s.name: s.bytes_per_token for s in layer_saved(MOE, eager, False)}
    kept = {s.name: s.bytes_per_token for s in layer_saved(MOE, fused, False)}
    assert extra.pop("expert_act_eager") == 2 * 1.25 * 3 * 2 * 512 and extra == kept
    dense = MOE.with_(dense_ffn_size=4096)
    extra = {s.name: s.bytes_per_token for s in layer_saved(dense, eager, True)}
    assert extra.pop("mlp_act_eager") == 2 * 2 * 4096
    assert extra == {s.name: s.bytes_per_token for s in layer_saved(dense, fused, True)}
