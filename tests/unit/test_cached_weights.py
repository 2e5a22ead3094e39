"""Transformer Engine's cached low-precision weight copies (simulator/memory/per_gpu.py cached_weight_bytes): by hand
on a small MoE model, and absent where the weights are quantized already, in BF16, or not TE's."""

from __future__ import annotations

import pytest

from simulator.memory.per_gpu import cached_weight_bytes, stage_memory
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.specs.models import ModelSpec

MODEL = ModelSpec("small", 4, 512, 8, 8, 256, 8, 2, 2000)
FLAGS = (
    "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2 --expert-model-parallel-size 4 "
    "--expert-tensor-parallel-size 1 "
    "--micro-batch-size 1 --global-batch-size 16 --seq-length 512 --bf16 --moe-token-dispatcher-type alltoall "
    "--moe-grouped-gemm"
)


def _workload(extra: str) -> StepWorkload:
    run = parse_megatron_args(f"{FLAGS} {extra}").resolve(MODEL, None, 16)
    return StepWorkload(MODEL, run.layout, 16, 8, 16, 512)


def test_two_bytes_per_linear_weight_by_hand() -> None:
    """Two layers a stage: attention (QKV 512 x 1,536 and output 512 x 512) over TP 2, and 8 experts of 3 x 512 x 256
    over EP 4; per-tensor FP8: data and transpose, 2 bytes each."""
    workload = _workload("--fp8-format e4m3 --fp8-recipe tensorwise")
    attention = (512 * 1536 + 512 * 512) / 2
    experts = 8 * 3 * 512 * 256 / 4
    assert cached_weight_bytes(workload, 0) == pytest.approx(2 * 2 * (attention + experts))
    mxfp8 = _workload("--fp8-format e4m3 --fp8-recipe mxfp8")
    assert cached_weight_bytes(mxfp8, 0) == pytest.approx(2 * 2 * (1 + 1 / 32) * (attention + experts))


@pytest.mark.parametrize(
    "extra", ["", "--fp8-format e4m3 --fp8-recipe tensorwise --fp8-param-gather --use-distributed-optimizer"]
)
def test_no_cache_in_bf16_or_with_fp8_weights(extra: str) -> None:
    workload = _workload(extra)
    assert cached_weight_bytes(workload, 0) == 0.0


def test_the_cache_is_in_the_weights_term() -> None:
    bf16, fp8 = _workload(""), _workload("--fp8-format e4m3 --fp8-recipe tensorwise")
    grown = stage_memory(fp8, 0).params_bytes - stage_memory(bf16, 0).params_bytes
    assert grown == pytest.approx(cached_weight_bytes(fp8, 0))
