"""``moesim validate --host`` (experiments/validation/host_bound.py): each case's host launch time per micro-batch
of its busiest stage, the GPU's idle time waiting for it, and the per-kernel host cost at which the case would be
exact, where that cost applies (eager kernels) and where CUDA graphs remove it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from experiments.cli.main import main
from experiments.validation.corpus import load_cases
from experiments.validation.host_bound import TOLERANCE_S, busiest_stage_host, implied_host_launch_s
from experiments.validation.validate import case_job, case_settings, host_row
from simulator.costs.calibration import DEFAULT_CALIBRATION, TORCH_OP_HOST_S
from simulator.report.simulate import simulate

# PP 2 / VP 12 / EP 8 with EP overlap (26.02): predicted about 2x fast, with the GPU idle for the host after the
# token-count syncs; NCCL's all-to-all at EP 16 (eager, graphs off): about 9% fast, the host far ahead of the GPU
HOST_BOUND = "bridge-qwen3-30b-a3b-h100-0016-r2602"
ALLTOALL = "bridge-ab-qwen3-30b-a3b-bf16-alltoall"
DENSE_SLOW = "bridge-llama-3.1-70b-h100-0064"  # predicted 14% slow: no host cost can make it exact


def _case(name: str):
    (case,) = load_cases(names=[name])
    return case


def _error(case, host_launch_s: float) -> float:
    job = case_job(case)
    report = simulate(
        job.model,
        job.layout,
        case.gpus,
        calibration=DEFAULT_CALIBRATION.with_(host_launch_s=host_launch_s),
        **case_settings(case, allow_oom=True),
    )
    return report.tokens_per_s_per_gpu / case.measured_tokens_per_s_per_gpu - 1


def test_the_implied_cost_brackets_the_measurement() -> None:
    """Just below the implied per-kernel cost the case is still predicted fast, just above it slow: the bisection
    found where the prediction crosses the measurement (above a bare torch op's 13.48 us, below a TE module's 36.5 us:
    the case is predicted slow at the calibration's)."""
    case = _case(HOST_BOUND)
    implied = implied_host_launch_s(case, case_job(case), case_settings(case, allow_oom=True))
    assert implied is not None and TORCH_OP_HOST_S < implied < DEFAULT_CALIBRATION.host_launch_s
    assert _error(case, implied - TOLERANCE_S) > 0 > _error(case, implied + TOLERANCE_S)


def test_a_case_predicted_slow_with_a_free_host_implies_none() -> None:
    """A case slower than measured even at zero host cost has no per-kernel cost that makes it exact."""
    case = _case(DENSE_SLOW)
    assert _error(case, 0.0) < 0
    assert implied_host_launch_s(case, case_job(case), case_settings(case, allow_oom=True)) is None


def test_launch_time_is_linear_in_the_per_kernel_cost_and_a_free_host_never_idles_the_gpu() -> None:
    """The host's launch time per micro-batch is its launches times host_launch_s: doubling the cost doubles it
    and keeps the count; at zero cost the host launches instantly and the GPU never waits for it, while at the published
    cost this layout leaves the GPU idle after its syncs."""
    case = _case(HOST_BOUND)
    h = DEFAULT_CALIBRATION.host_launch_s
    job = case_job(case)
    launches, host_s, stage_s, idle_s, micro_batches, _ = busiest_stage_host(case, job)
    launches_2, host_2_s, stage_2_s, idle_2_s, *_ = busiest_stage_host(
        case, job, DEFAULT_CALIBRATION.with_(host_launch_s=2 * h)
    )
    _, host_0_s, stage_0_s, idle_0_s, *_ = busiest_stage_host(case, job, DEFAULT_CALIBRATION.with_(host_launch_s=0.0))
    assert launches == pytest.approx(launches_2) and launches > 1000
    assert host_2_s == pytest.approx(2 * host_s)
    assert (host_0_s, idle_0_s) == (0.0, 0.0)
    assert 0 < idle_s < idle_2_s and stage_0_s < stage_s < stage_2_s
    assert micro_batches == 1024 // 8  # global batch 1,024 over DP 8 (16 GPUs, PP 2), micro-batch 1


def test_fill_is_the_measured_step_over_the_stage_launches_of_a_step() -> None:
    """fill: the measured step (global batch x sequence / (tokens/s per GPU x GPUs)) over the busiest stage's
    launches per step (per micro-batch x micro-batches)."""
    case = _case(ALLTOALL)
    row = host_row(case)
    launches, _, _, _, micro_batches, _ = busiest_stage_host(case, case_job(case))
    step_s = 1024 * 4096 / (case.measured_tokens_per_s_per_gpu * 16)
    assert row is not None and row.fill_s == pytest.approx(step_s / (launches * micro_batches))
    # the eager all-to-all case: the host runs ahead (under half the stage's time, little idle), so the implied cost is
    # near fill (the cost at which the launches alone take the measured step; 0.89 of it since the unfused permute's
    # backward is index_add_ at its measured rate, 0.9-1 before)
    assert row.host_share < 0.5 and row.implied_s is not None and 0.85 * row.fill_s < row.implied_s < row.fill_s


def test_cuda_graphs_remove_the_launches_they_capture() -> None:
    """TE-scoped graphs over attention and the router (Megatron-Bridge PR #3868's scopes) replace each captured
    run of kernels by one launch: fewer launches and less host time per micro-batch; the MoE part after the
    token-count sync stays eager, so launches remain."""
    case = _case(ALLTOALL)
    graphed = replace(
        case,
        megatron_args=case.megatron_args
        + " --cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess",
    )
    assert "--cuda-graph" not in case.megatron_args
    eager_launches, eager_host_s, *_ = busiest_stage_host(case, case_job(case))
    graph_launches, graph_host_s, *_ = busiest_stage_host(graphed, case_job(graphed))
    assert 0 < graph_launches < eager_launches and graph_host_s < eager_host_s


def test_validate_host_prints_the_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--host adds a table after the main one (and a "host" object per case to --json)."""
    argv = ["validate", "--case", DENSE_SLOW, "--host", "--jobs", "1", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith(DENSE_SLOW)]
    assert len(lines) == 2 and lines[1].endswith("none (slow with a free host)")
    assert main(argv + ["--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["cases"]
    host = row["host"]
    assert host["implied_host_launch_s"] is None and host["host_launch_s"] == DEFAULT_CALIBRATION.host_launch_s
    assert host["host_s_per_micro_batch"] == pytest.approx(
        host["launches_per_micro_batch"] * DEFAULT_CALIBRATION.host_launch_s
    )


def test_per_expert_launches_counted_by_hand() -> None:
    """TE's per-expert launches from one C++ call, per micro-batch, counted by hand: Qwen3-30B-A3B at EP 16 has 8 local
    experts in each of 48 layers, each with two FCs whose GEMM runs forward, as input gradient and as weight gradient
    (48 x 8 x 2 x 3 = 2,304 in BF16); FP8 tensorwise adds, per expert and FC, the forward input's and the output
    gradient's quantization at 4 kernels each (zero amax, amax, scale, cast-transpose: 48 x 8 x 2 x 2 x 4 = 6,144).
    Nemotron 3 Nano at EP 8 (16 local experts, 23 MoE layers) recomputes its MoE layers: a fourth GEMM pass."""
    counts = {}
    for name in ("bridge-ab-qwen3-30b-a3b-bf16-hybridep", "bridge-qwen3-30b-a3b-h100-0016",
                 "bridge-ab-nemotron-3-nano-bf16-recompute-moe"):  # fmt: skip
        case = _case(name)
        launches, *_, per_expert = busiest_stage_host(case, case_job(case))
        counts[name] = (per_expert, launches)
    assert counts["bridge-ab-qwen3-30b-a3b-bf16-hybridep"][0] == 48 * 8 * 2 * 3
    assert counts["bridge-qwen3-30b-a3b-h100-0016"][0] == 48 * 8 * 2 * 3 + 48 * 8 * 2 * 2 * 4
    assert counts["bridge-ab-nemotron-3-nano-bf16-recompute-moe"][0] == 23 * 16 * 2 * 4
    assert all(per_expert < launches for per_expert, launches in counts.values())
