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
