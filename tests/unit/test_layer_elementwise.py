"""The residual adds, autograd's gradient sums and Megatron-Core's Q/K/V copies of one layer
(workloads/recipes/residual.py), their bytes counted by hand."""

from __future__ import annotations

from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.ops import Role
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

# hidden 1,024; 16 query heads and 4 key-value heads of 64 (4 queries per group); 16 experts, top-2
MODEL = ModelSpec("m", 1, 1024, 16, 4, 512, 16, 2, 64)
SEQ = 2048  # tokens per GPU (TP 1, micro-batch 1)
ACT = SEQ * 1024 * 2  # one [s, h] BF16 activation: 4,194,304 B


def _layout(dispatcher: str = "alltoall", **fields: object) -> LayoutSpec:
    return LayoutSpec(
        "t",
        attention="tp",
        intra_size=1,
        ffn="ep",
        ep=8,
        intra_op_overlap=False,
        inter_op_overlap=False,
        recompute="none",
        token_dispatcher=dispatcher,
        **fields,
    )


def _ops(layout: LayoutSpec, model: ModelSpec = MODEL, dense: bool = False):
    steps = layer_recipe(model, layout, SEQ, 8, dense)
    return {op.name: op for op in forward_ops([(0, steps)], layout)}, {
        op.name: op for op in backward_ops([(0, steps)], layout)
    }


def test_both_residual_adds_read_two_and_write_one_activation() -> None:
    forward, backward = _ops(_layout())
    for name in ("attn_residual", "mlp_residual"):
        assert forward[name].mem_bytes == 3 * ACT == 12_582_912
        assert forward[name].kernels == 1
    # backward: the sums where each residual's input also fed its branch's norm, read 2 write 1: the layer
    # input's charged at the attention's residual, the MLP input's after the pre-MLP norm's backward
    assert backward["attn_residual.bwd"].mem_bytes == 3 * ACT
    assert "mlp_residual.bwd" not in backward and "ffn_input_grad_sum" not in forward
    assert (backward["ffn_input_grad_sum.bwd"].mem_bytes, backward["ffn_input_grad_sum.bwd"].kernels) == (3 * ACT, 1)
    names = list(backward)
    assert names.index("ffn_norm.bwd") < names.index("ffn_input_grad_sum.bwd") < names.index("attn_residual.bwd")
    dense_forward, _ = _ops(_layout(), dense=True)
    assert dense_forward["mlp_residual"].mem_bytes == 3 * ACT  # a dense layer's MLP has its residual too


def test_the_moe_input_gradient_is_summed_once_per_extra_consumer() -> None:
    forward, backward = _ops(_layout())
    assert "moe_input_grad_sum" not in forward  # no forward kernel
    summed = backward["moe_input_grad_sum.bwd"]
    assert (summed.mem_bytes, summed.kernels, summed.role) == (3 * ACT, 1, Role.INPUT_GRAD)
    # its gradient meets the pre-MLP norm's backward only after the sum
    names = [op.name for op in backward_ops([(0, layer_recipe(MODEL, _layout(), SEQ, 8))], _layout())]
    assert names.index("router.dgrad") < names.index("moe_input_grad_sum.bwd") < names.index("ffn_norm.bwd")
    shared = ModelSpec("s", 1, 1024, 16, 4, 512, 16, 2, 64, num_shared_experts=1, shared_expert_ffn_size=512)
    _, backward = _ops(_layout(), shared)
    summed = backward["moe_input_grad_sum.bwd"]  # router, dispatcher and shared experts: two sums
    assert (summed.mem_bytes, summed.kernels) == (2 * 3 * ACT, 2)


def test_megatron_copies_the_grouped_query_and_concatenates_the_qkv_gradient() -> None:
    forward, backward = _ops(_layout())
    q_bytes = SEQ * 16 * 64 * 2  # the query, [s, 16 heads, 64] BF16: 4,194,304 B
    qkv_bytes = SEQ * (16 + 2 * 4) * 64 * 2  # Q, K and V: 6,291,456 B
    assert forward["q_reshape_copy"].mem_bytes == 2 * q_bytes == 8_388_608
    assert "q_reshape_copy.bwd" not in backward  # the reshape's backward is a view
    assert "qkv_grad_cat" not in forward
    assert backward["qkv_grad_cat.bwd"].mem_bytes == 2 * qkv_bytes == 12_582_912
    names = list(backward)
    assert names.index("qkv_grad_cat.bwd") < names.index("qkv_proj.dgrad")
    # one query head per group: the reshape is a view, but the gradient concat stays
    forward, backward = _ops(_layout(), ModelSpec("mha", 1, 1024, 16, 16, 512, 16, 2, 64))
    assert "q_reshape_copy" not in forward and "qkv_grad_cat.bwd" in backward
    # MegaScale-MoE's own attention publishes no such kernels
    forward, backward = _ops(_layout("megascale"))
    assert "q_reshape_copy" not in forward and "qkv_grad_cat.bwd" not in backward


def test_te_norms_read_x_and_dy_and_write_dx_in_two_kernels() -> None:
    """TE's RMSNorm: forward reads x and writes y (2 ACT, 1 kernel); backward reads dy and x and writes dx
    (3 ACT = 12,582,912 B) in two kernels, the gradient kernel and the gains' finalize kernel (rmsnorm_bwd_kernels.cuh);
    the q / k norms of a qk-norm model the same per tensor (2 + 2 kernels backward)."""
    forward, backward = _ops(_layout())
    for name in ("attn_norm", "ffn_norm"):
        assert (forward[name].mem_bytes, forward[name].kernels) == (2 * ACT, 1)
        assert (backward[f"{name}.bwd"].mem_bytes, backward[f"{name}.bwd"].kernels) == (3 * ACT, 2) == (12_582_912, 2)
    qk = ModelSpec("m", 1, 1024, 16, 4, 512, 16, 2, 64, qk_layernorm=True)
    forward, backward = _ops(_layout(), qk)
    elements = SEQ * (16 + 4) * 64  # q and k of every head (TP 1)
    assert (forward["qk_norm"].mem_bytes, forward["qk_norm"].kernels) == (2 * 2 * elements, 2)
    assert (backward["qk_norm.bwd"].mem_bytes, backward["qk_norm.bwd"].kernels) == (3 * 2 * elements, 4)


def test_fused_rope_backward_moves_the_forward_bytes() -> None:
    """TE's fused_rope_backward reads dq (dk) and the FP32 angles and writes the input gradient, one kernel per
    tensor: q and k of 2,048 positions x (16 + 4) heads x 64 read and written (BF16), the angle table
    (2,048 x 64 x 4 B) read once per tensor: 10,485,760 + 1,048,576 = 11,534,336 B both ways."""
    forward, backward = _ops(_layout(), ModelSpec("m", 1, 1024, 16, 4, 512, 16, 2, 64, rope=True))
    rope = 2 * SEQ * (16 + 4) * 64 * 2 + 2 * SEQ * 64 * 4
    assert rope == 11_534_336
    assert (forward["rope"].mem_bytes, forward["rope"].kernels) == (rope, 2)
    assert (backward["rope.bwd"].mem_bytes, backward["rope.bwd"].kernels) == (rope, 2)
