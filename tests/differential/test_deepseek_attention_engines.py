"""DeepSeek-V4's attention and mHC (workloads/recipes/dsv4_attention.py, residual.py) and DeepSeek-V3.2's DSA
(workloads/recipes/mla.py) through every engine path: the folded placement against every GPU unfolded, the memoized
tasks against op level, and the steady shortcut against the full run, on 4-layer models with EP over two 4-GPU
nodes."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import Engine
from simulator.fast.steady import run_step
from tests.engine_diff import assert_same_fields
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.specs.models import ModelSpec

SMALL = ModelSpec(
    "small-dsv4",
    4,
    512,
    8,
    1,
    256,
    8,
    2,
    2000,
    attention="dsv4",
    kv_channels=64,
    q_lora_rank=128,
    qk_rope_head_dim=16,
    o_lora_rank=64,
    o_groups=2,
    sliding_window=32,
    compress_ratios=(0, 4, 128, 4, 0),
    index_heads=4,
    index_head_dim=32,
    index_topk=16,
    residual_streams=4,
    mtp_layers=1,
)
# MLA with DSA, the indexer on layers 1 and 3 (from 1; Megatron's topk_freq 2), reused on 2 and 4
SMALL_DSA = ModelSpec(
    "small-dsa",
    4,
    512,
    8,
    8,
    256,
    8,
    2,
    2000,
    attention="mla",
    kv_lora_rank=64,
    q_lora_rank=128,
    qk_rope_head_dim=16,
    qk_nope_head_dim=32,
    v_head_dim=32,
    index_heads=4,
    index_head_dim=32,
    index_topk=64,
    index_topk_freq=2,
)
FLAGS = (
    "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 --expert-model-parallel-size 4 "
    "--micro-batch-size 1 --seq-length 512 --bf16 --moe-token-dispatcher-type alltoall --moe-grouped-gemm "
    "--use-distributed-optimizer --overlap-grad-reduce"
)


def _workload(
    global_batch: int, fused_mhc: bool, extra: str = "", model: ModelSpec = SMALL
) -> tuple[StepWorkload, object]:
    run = parse_megatron_args(f"{FLAGS} --global-batch-size {global_batch} {extra}").resolve(model, None, 8)
    layout = run.layout.with_(fused_mhc=fused_mhc)
    return StepWorkload(model, layout, 8, 4, global_batch, 512), cluster_preset("h100", 8, domain_gpus=4)


RECOMPUTE = "--recompute-granularity selective --recompute-modules mhc mla_up_proj"


@pytest.mark.parametrize(
    "fused_mhc, extra, model",
    [
        (False, "", SMALL),
        (True, "", SMALL),
        (True, RECOMPUTE, SMALL),
        (False, "", SMALL_DSA),
        (False, "--context-parallel-size 2", SMALL_DSA),
    ],
    ids=["dsv4-eager-mhc", "dsv4-fused-mhc", "dsv4-recompute", "dsa", "dsa-cp2"],
)
def test_folded_equals_unfolded_and_op_level(fused_mhc: bool, extra: str, model: ModelSpec) -> None:
    workload, cluster = _workload(16, fused_mhc, extra, model)
    folded = Engine(workload, cluster).run()
    assert Engine(workload, cluster, placement="unfolded").run().step_time_s == pytest.approx(
        folded.step_time_s, rel=1e-9
    )
    op_level = Engine(workload, cluster, memoize=False).run()  # (memoized tasks leave NVLink bytes uncounted)
    assert op_level.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)
    for mine, theirs in zip(op_level.stages, folded.stages):
        assert mine.busy_s == pytest.approx(theirs.busy_s, rel=1e-9) and mine.end_s == pytest.approx(theirs.end_s)


@pytest.mark.parametrize("model", [SMALL, SMALL_DSA], ids=["dsv4", "dsa"])
@pytest.mark.parametrize("global_batch", [64, 96, 128])
def test_shortcut_equals_the_full_run(global_batch: int, model: ModelSpec) -> None:
    workload, cluster = _workload(global_batch, True, model=model)
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    assert step.runs and sum(step.runs) < workload.micro_batches and step.bound_rel == 0
    assert_same_fields(step.result, Engine(workload, cluster).run())
