"""Weight-gradient GEMMs add into the main gradients (gradient accumulation fusion, workloads/graph/op_lists.py): every
wgrad op carries the main gradients' width from the layout, no other GEMM does."""

from __future__ import annotations

from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.ops import Role
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec


def _gemm_ops(main_grads_dtype: str) -> list:
    model = ModelSpec("m", 1, 2048, 16, 4, 768, 16, 4, 64)
    layout = LayoutSpec("t", intra_size=1, ffn="ep", main_grads_dtype=main_grads_dtype)
    steps = layer_recipe(model, layout, 4096, 8)
    ops = forward_ops([(0, steps)], layout) + backward_ops([(0, steps)], layout)
    return [op for op in ops if op.gemm is not None]


def test_wgrads_accumulate_into_main_grads_of_the_layouts_width() -> None:
    """FP32 main grads (the default): 4 B per element; BF16 (--grad-reduce-in-bf16): 2; forward and dgrad
    GEMMs write a plain output. The layer has wgrads of its attention, router and expert GEMMs."""
    for dtype, width in (("fp32", 4), ("bf16", 2)):
        ops = _gemm_ops(dtype)
        wgrads = [op for op in ops if op.role == Role.WEIGHT_GRAD]
        assert len(wgrads) >= 4
        assert {op.gemm.accumulate_bytes for op in wgrads} == {width}
        assert {op.gemm.accumulate_bytes for op in ops if op.role != Role.WEIGHT_GRAD} == {0}
