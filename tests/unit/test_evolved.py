"""workloads.ops.evolved: ``dataclasses.replace`` for ops, steps and GEMMs, without its fields() walk and __init__."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from workloads.graph.step import StepWorkload
from workloads.ops import COMM, Gemm, Op, Step, evolved
from workloads.schedules.base import BACKWARD, FORWARD
from workloads.schedules.pipeline_tasks import TaskKey
from workloads.specs.layouts import LAYOUT_PRESETS, LayoutSpec
from workloads.specs.models import MODEL_PRESETS


def test_evolved_is_replace_for_every_op_of_a_step() -> None:
    """Every forward and backward op of a MoE step (GEMMs, attention, collectives, fused ops), changed in one field
    and in two: equal to ``replace``'s copy, the original untouched."""
    workload = StepWorkload(MODEL_PRESETS["mixtral-8x7b"], LAYOUT_PRESETS["megascale-moe"].with_(pp=2), 16, 8, 16, 2048)
    block = workload.block_key(0)
    ops = [op for phase in (FORWARD, BACKWARD) for op in workload.task_ops(TaskKey(phase, (block,)))]
    assert len(ops) > 50 and any(op.gemm for op in ops) and any(op.is_comm for op in ops)
    for op in ops:
        before = replace(op)
        assert evolved(op) == op
        assert evolved(op, deps=()) == replace(op, deps=())
        assert evolved(op, stream=COMM, comm_bytes=op.comm_bytes + 1) == replace(
            op, stream=COMM, comm_bytes=op.comm_bytes + 1
        )
        assert op == before
    assert all(f.name in Op.__slots__ for f in fields(Op))


def test_evolved_copies_steps_and_gemms_and_refuses_a_checked_spec() -> None:
    gemm = Gemm(4096, 14336, 8192, groups=8)
    assert evolved(gemm, m=1024) == replace(gemm, m=1024)
    step = Step("fc1", "gemm", gemm=gemm)
    assert evolved(step, kernels=3) == replace(step, kernels=3)
    with pytest.raises(AttributeError):
        evolved(step, no_such_field=1)
    with pytest.raises(TypeError, match="LayoutSpec"):  # its __post_init__ checks fields: replace() it
        evolved(LAYOUT_PRESETS["megascale-moe"], pp=2)
    assert isinstance(replace(LAYOUT_PRESETS["megascale-moe"], pp=2), LayoutSpec)
