"""useful_fraction counts tasks once per schedule shape (simulator/bounds.shape_task_counts): the same fraction
as counting each workload's own schedule (periodic.task_counts), for workloads that share a shape or not."""

from __future__ import annotations

import pytest

from simulator.fast.periodic import task_counts
from simulator.report import useful
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset


@pytest.mark.parametrize(
    "model, layout, gpus, batch",
    [
        ("paper-352b", "megascale-moe", 240, 720),  # PP 15, 48 micro-batches
        ("paper-352b", "sp-ep", 240, 720),  # the same shape, another layout
        ("paper-352b", "megatron-lm", 480, 360),
        ("deepseek-v3", "deepseek-v3", 2048, 4096),  # uneven PP 16, cross-node EP
    ],
)
def test_useful_fraction_with_shared_counts_equals_own_counts(model, layout, gpus, batch, monkeypatch) -> None:
    workload = StepWorkload(model_preset(model), layout_preset(layout), gpus, 8, batch, 4096)
    shared = useful.useful_fraction(workload)
    monkeypatch.setattr(useful, "shape_task_counts", lambda shape: task_counts(shape.build()))
    assert useful.useful_fraction(workload) == shared
    assert 0 < shared <= 1
