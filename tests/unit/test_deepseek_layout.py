"""The deepseek-v3 layout: attention without TP (intra_size 1) beside EP 64, uneven PP, FP8 GEMMs."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.generations import gemm_table
from simulator.costs.kernels import gemm_time_s
from topologies.hardware import gpu_preset
from workloads.graph.step import StepWorkload
from workloads.ops import Gemm, GemmPrecision
from workloads.recipes.layers import layer_recipe
from workloads.schedules.base import FORWARD, Task
from workloads.schedules.pipeline_tasks import Block, TaskKey
from workloads.specs.layouts import layout_preset
from workloads.specs.models import LayerKind, model_preset

WORKLOAD = StepWorkload(model_preset("deepseek-v3"), layout_preset("deepseek-v3"), 2048, 8, 15360, 4096)


def test_degrees_and_batches() -> None:
    """2,048 GPUs / PP 16 = 128 attention-DP ranks; experts: 128 / EP 64 = 2 replicas; 15,360 / 128 = 120."""
    assert (WORKLOAD.dp, WORKLOAD.expert_dp, WORKLOAD.micro_batches) == (128, 2, 120)


def test_uneven_pp_gives_fewer_layers_to_the_last_and_first_stages() -> None:
    """61 = 16 x 4 - 3: stages 15, 0 and 14 hold 3 layers; stage 0 holds exactly the 3 dense layers."""
    counts = [len(WORKLOAD.stage_layers(s)) for s in range(16)]
    assert counts == [3] + [4] * 13 + [3, 3] and sum(counts) == 61
    assert WORKLOAD.task_key(0, Task(FORWARD, 0, 0)) == TaskKey(
        FORWARD, (Block(True, False, (LayerKind(True, 0),) * 3),)
    )
    assert WORKLOAD.task_key(1, Task(FORWARD, 0, 0)) == TaskKey(
        FORWARD, (Block(False, False, (LayerKind(False, 0),) * 4),)
    )


def test_fp8_gemms_and_their_time() -> None:
    steps = layer_recipe(WORKLOAD.model, WORKLOAD.layout, 4096, 8, dense=False)
    precision = {s.name: s.gemm.precision for s in steps if s.gemm is not None}
    assert precision["router"] == GemmPrecision.BF16
    # the preset's FP8 (no --fp8-recipe) is DeepSeek-V3's 1x128 / 128x128 block scaling
    assert precision["expert_fc13"] == precision["q_up"] == precision["shared_fc2"] == GemmPrecision.FP8_BLOCKWISE
    gpu, cal = gpu_preset("h800"), DEFAULT_CALIBRATION
    bf16 = gemm_time_s(Gemm(4096, 4096, 7168), gpu, cal) - cal.kernel_overhead_s
    fp8 = GemmPrecision.FP8_BLOCKWISE
    half = gemm_time_s(Gemm(4096, 4096, 7168, precision=fp8), gpu, cal) - cal.kernel_overhead_s
    # Compute-bound, 8 waves of tiles either way: FP8 at its peak (1,979 vs 989 TFLOP/s) and at its own
    # published efficiency at K = 7,168 (DeepGEMM), not BF16's (cuBLAS): faster than BF16, but not 2x.
    table = gemm_table(gpu, cal)
    ratio = (989 / 1979) * table.tile_efficiency(7168, GemmPrecision.BF16) / table.tile_efficiency(7168, fp8)
    assert half == pytest.approx(bf16 * ratio) and 1.5 < bf16 / half < 2.0


def test_expert_params_shard_over_ep_and_sync_over_expert_dp() -> None:
    """Stage 1: 4 MoE layers x 256 experts x 3 x 7168 x 2048 / 64 per GPU, synced over 2 replicas."""
    groups = WORKLOAD.stage_param_groups(1)
    experts = 4 * 256 * 3 * 7168 * 2048 / 64
    assert groups[1] == (experts, experts, 2, experts)  # held, synced, expert DP, trained
    assert groups[0][2] == 128
