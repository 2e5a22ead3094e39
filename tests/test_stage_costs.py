"""experiments.stage_costs: where one micro-batch of the busiest stage goes (misses in `moesim validate`)."""

from __future__ import annotations

import pytest

from experiments.stage_costs import FP8_QUANTIZATION, busiest_stage
from simulator.calibration import DEFAULT_CALIBRATION
from simulator.report import prepare
from simulator.timing import time_task
from workloads.config import layout_from_dict
from workloads.schedules import BACKWARD, FORWARD, Task

BATCH = 720


def test_without_overlap_compute_exposed_comm_and_host_waits_add_up_to_the_tasks() -> None:
    """TP+TP (the paper's Table 5 baseline) runs every op on the compute stream: the parts of the busiest stage
    (the last, which also runs the LM head) add up to its forward and backward spans timed alone."""
    workload, cluster, _ = prepare("paper-352b", "tp-tp", 240, None, BATCH, 8192, None, True)
    costs = busiest_stage(workload, cluster, DEFAULT_CALIBRATION)
    assert costs.stage == workload.pp - 1
    spans = sum(time_task(workload, cluster, costs.stage, Task(d, 0, 0)).duration_s for d in (FORWARD, BACKWARD))
    assert costs.duration_s == pytest.approx(spans, rel=1e-12)
    parts = sum(costs.compute_s.values()) + sum(costs.exposed_comm_s.values()) + costs.host_wait_s
    assert parts == pytest.approx(costs.duration_s, rel=1e-9)
    assert costs.exposed_comm_s["tp"] > 0 and costs.compute_s[FP8_QUANTIZATION] == 0.0
    each = [sum(time_task(workload, cluster, s, Task(d, 0, 0)).duration_s for d in (FORWARD, BACKWARD)) for s in (0, 7)]
    assert costs.lightest_s == pytest.approx(min(each), rel=1e-12)  # stages 1-13 run stage 7's tasks


def test_fp8_quantization_is_its_own_part_and_every_chunk_counts() -> None:
    """The paper's model under TE's tensorwise FP8 with 2 virtual stages: the quantization kernels are charged
    to FP8 quantization, and the stage's cost is both chunks' forward and backward."""
    layout = {"name": "fp8", "base": "megascale-moe", "gemm_dtype": "fp8", "fp8_recipe": "tensorwise"}
    layout |= {"schedule": "interleaved", "virtual_stages": 2, "pp": 15}
    workload, cluster, _ = prepare("paper-352b", layout_from_dict(layout), 240, None, BATCH, 8192, None, True)
    costs = busiest_stage(workload, cluster, DEFAULT_CALIBRATION)
    tasks = [Task(d, 0, c) for c in (0, 1) for d in (FORWARD, BACKWARD)]
    spans = sum(time_task(workload, cluster, costs.stage, task).duration_s for task in tasks)
    assert costs.duration_s == pytest.approx(spans, rel=1e-12)
    assert costs.compute_s[FP8_QUANTIZATION] > 0
    assert "FP8 quantization" in costs.phrase()
