"""The closed form of one op alone (simulator/costs/op_time.py) against the engine's event path timing that op
alone (simulator/engine/timing.time_op_s, which starts at the host launch): every op of real tasks, every kind."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.op_time import op_time_alone_s
from simulator.engine.timing import time_op_s
from simulator.streams.op_costs import launch_times_s
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.ops import COLLECTIVE, FUSED
from workloads.schedules.pipeline_tasks import BACKWARD, FORWARD, Task
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

GPUS = 8  # one node, one pipeline stage, one replica
CASES = (  # MegaScale-MoE's fused AG/RS ops; Megatron's host syncs and TP collectives; Table 5's TP+TP
    ("paper-352b", "megascale-moe"),
    ("paper-352b", "megatron-lm"),
    ("mixtral-8x7b", "tp-tp"),
)


def _ops(model: str, layout: str):
    one_stage = layout_preset(layout).with_(pp=1)
    workload = StepWorkload(model_preset(model).with_(num_layers=2), one_stage, GPUS, GPUS, 1, 4096)
    seen = {}
    for direction in (FORWARD, BACKWARD):
        for op in workload.task_ops(workload.task_key(0, Task(direction, 0, 0))):
            seen.setdefault((op.kind, op.collective, op.name), op)
    return list(seen.values())


@pytest.mark.parametrize(("model", "layout"), CASES)
def test_one_op_alone_is_its_closed_form_after_its_launch(model: str, layout: str) -> None:
    gpu = cluster_preset("h800", GPUS).gpu
    ops = _ops(model, layout)
    assert {COLLECTIVE, FUSED} & {op.kind for op in ops}  # each case reaches the comm paths
    for op in ops:
        alone = replace(op, deps=())
        launch_s = launch_times_s((alone,), DEFAULT_CALIBRATION, gpu)[0]
        event_s = time_op_s(alone, gpu)
        assert event_s == pytest.approx(launch_s + op_time_alone_s(alone, gpu), rel=1e-9, abs=1e-12), op.name
