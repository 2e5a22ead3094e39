"""Weight gradients without gradient-accumulation fusion (workloads/graph/main_grad.py): the wgrad GEMM writes its
product out and a kernel per weight adds it into the main gradient, by hand."""

from __future__ import annotations

import pytest

from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import BYTES_BF16, MEMORY, Role
from workloads.schedules.base import BACKWARD
from workloads.schedules.pipeline_tasks import TaskKey
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.precision import DTYPE_BYTES

MOE = ModelSpec("toy-moe", 4, 1024, 8, 4, 2048, 8, 2, 1024)


def _backward(**changes: object) -> list:
    fields = {"attention": "tp", "ffn": "ep", "intra_size": 1, "pp": 1, "ep": 8, "recompute": "none"}
    workload = StepWorkload(MOE, LayoutSpec("t", **{**fields, **changes}), 8, 8, 8, 4096)
    return list(workload.task_ops(TaskKey(BACKWARD, (workload.block_key(0),))))


def test_the_flag_turns_fusion_off() -> None:
    assert parse_megatron_args("--use-distributed-optimizer").layout_fields["grad_accumulation_fusion"]
    flags = "--use-distributed-optimizer --no-gradient-accumulation-fusion"
    assert not parse_megatron_args(flags).layout_fields["grad_accumulation_fusion"]


@pytest.mark.parametrize("main_grads", ["fp32", "bf16"])
def test_each_wgrad_is_written_out_then_added(main_grads: str) -> None:
    """Fused, each wgrad adds into the main gradient in its epilogue; unfused, it writes a 16-bit product and an add
    kernel per weight (per expert of a grouped GEMM) reads it and the main gradient and writes the main gradient."""
    fused, unfused = (
        _backward(main_grads_dtype=main_grads),
        _backward(main_grads_dtype=main_grads, grad_accumulation_fusion=False),
    )
    wgrads = [op for op in fused if op.role == Role.WEIGHT_GRAD]
    assert wgrads and all(op.gemm.accumulate_bytes == DTYPE_BYTES[main_grads] for op in wgrads)
    assert not [op for op in fused if op.name.endswith(".main_grad_add")]
    by_name = {op.name: (index, op) for index, op in enumerate(unfused)}
    for wgrad in wgrads:
        index, written = by_name[wgrad.name]
        assert written.gemm.accumulate_bytes == 0
        _, add = by_name[f"{wgrad.name.removesuffix('.wgrad')}.main_grad_add"]
        elements = written.gemm.m * written.gemm.n * written.gemm.groups
        assert add.kind == MEMORY and add.deps == (index,) and add.kernels == written.gemm.groups
        assert add.mem_bytes == elements * (BYTES_BF16 + 2 * DTYPE_BYTES[main_grads])
    assert len(unfused) == len(fused) + len(wgrads)
