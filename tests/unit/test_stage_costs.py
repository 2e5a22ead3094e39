"""experiments.common.stage_costs: where one micro-batch of the busiest stage goes (misses in `moesim validate`)."""

from __future__ import annotations

import pytest

from experiments.common.stage_costs import FP8_QUANTIZATION, busiest_stage
from experiments.validation.corpus import CASES_DIR, load_case
from experiments.validation.validate import case_job
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.timing import time_task
from simulator.report.simulate import prepare, simulate
from workloads.inputs.yaml_files import layout_from_dict
from workloads.schedules.base import BACKWARD, FORWARD, Task

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


def _busiest_is_the_steps_share(name: str) -> tuple:
    """A Qwen3-30B-A3B matched case (16 H100, PP 1, batch 1,024 x 4,096: 64 micro-batches per GPU, the DP traffic
    hidden): its workload, cluster and busiest stage, checked to be the step's share per micro-batch (1%)."""
    case = load_case(CASES_DIR / f"{name}.yaml")
    job = case_job(case)
    workload, cluster, _ = prepare(job.model, job.layout, case.gpus, case.cluster, 1024, 4096, None, True)
    costs = busiest_stage(workload, cluster, DEFAULT_CALIBRATION)
    report = simulate(job.model, job.layout, case.gpus, cluster=case.cluster, global_batch=1024, seq_len=4096)
    assert costs.duration_s == pytest.approx(report.step_time_s / 64, rel=0.01)
    return workload, cluster, costs


def test_cross_node_all_to_all_is_timed_on_the_nic() -> None:
    """Qwen3-30B-A3B on 16 H100 with NCCL's all-to-all across the 2 nodes (PP 1, 64 micro-batches per GPU, the
    DP gradient traffic hidden): one micro-batch's forward and backward timed alone, their cross-node bytes on an
    idle NIC as the step's replay moves them, is the step's share per micro-batch (within 1%). Timed over NVLink
    alone, the all-to-alls took a third of their NIC time (389 against 581 ms)."""
    _, _, costs = _busiest_is_the_steps_share("bridge-ab-qwen3-30b-a3b-bf16-alltoall")
    assert costs.exposed_comm_s["ep"] > 0.4 * costs.duration_s  # NIC-bound


def test_with_ep_overlap_a_micro_batch_is_its_share_of_the_f_and_b_pairs() -> None:
    """Megatron-Core's EP overlap (Qwen3-30B-A3B, HybridEP across 2 nodes, PP 1): the steady state runs F&B pairs,
    one micro-batch's forward beside another's backward, after one lone forward and before one lone backward.
    A micro-batch's cost is its share of each kind of task the stage runs (63 F&B, 1 F, 1 B over 64), which is
    the step's per micro-batch (within 1%); the lone forward and backward alone would count its all-to-alls
    whole (12% more here)."""
    workload, cluster, costs = _busiest_is_the_steps_share("bridge-ab-qwen3-30b-a3b-bf16-hybridep-epoverlap")
    apart = sum(time_task(workload, cluster, 0, Task(d, 0, 0)).duration_s for d in (FORWARD, BACKWARD))
    assert apart > 1.05 * costs.duration_s
