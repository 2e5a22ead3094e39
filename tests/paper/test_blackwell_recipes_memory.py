"""The DGX-GB200 MoE rows of Megatron-Bridge's performance summary fit in memory or "may not fit"; none is refused.

Source: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md at 067f987d (the 26.08 NeMo container), each row's
recipe rebuilt as the Megatron-LM flags it amounts to from src/megatron/bridge/perf_recipes/<family>/gb200/ at the same
commit (with _common.py _benchmark_common and _perf_precision: grad_reduce_in_fp32 False is --grad-reduce-in-bf16,
and the family's full-iteration MXFP8 helper: HybridEP, full-iteration CUDA graph, paged stash, EP overlap). These
runs trained on real GPUs, so the memory model must not refuse them (issue 39). They are not validation cases: no
Blackwell run is in the corpus's error band.

Rows not rebuilt: DeepSeek-V4 Flash (no released config.json moesim reads), Nemotron 3 Nano / 3.5 Lightning / 3 Super /
3 Ultra (hybrid Mamba: Mamba layers are not modelled), every DGX-GB300 row (no GB300 preset). The summary at this
commit has no DGX-B200 row.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from simulator.memory.activations import layer_saved
from simulator.memory.per_gpu import GIB, peak_memory
from simulator.memory.verdict import Verdict, memory_verdict
from simulator.report.simulate import prepare
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model

# _enable_hybridep_full_iteration_mxfp8 (perf_recipes/qwen/common.py), _enable_deepseek_full_iteration_mxfp8
# (deepseek/common.py) and _apply_gpt_oss_120b_full_iter_fp8mx_configs (gpt_oss/common.py): the same settings. The
# recipes' tp_comm_overlap has no effect at TP 1 and is left out (Megatron-LM refuses it without sequence parallelism).
FULL_ITERATION_MXFP8 = (
    "--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag "
    "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32 "
    "--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad --te-rng-tracker "
    "--moe-paged-stash --moe-expert-rank-capacity-factor 1.5 --moe-paged-stash-buffer-size-factor-cuda 1.2 "
    "--moe-paged-stash-buffer-size-factor-cpu 1.0 --moe-pad-experts-for-cuda-graph-inference "
    "--use-transformer-engine-op-fuser --moe-mlp-glu-interleave-size 32 "
    "--overlap-moe-expert-parallel-comm --delay-wgrad-compute "
    "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16 "
    "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te "
    "--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing "
    "--swiglu --untie-embeddings-and-output-weights --seq-length 4096 "
)


class Row(NamedTuple):
    """One row of the summary and its recipe as Megatron-LM flags."""

    name: str
    model: str
    gpus: int
    global_batch: int
    flags: str
    tokens_per_s_per_gpu: float  # measured, the row's "Tokens / sec / GPU"


ROWS = (
    # qwen/gb200/qwen3_moe.py qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_config over the 8-GPU H100 base recipe
    Row(
        "qwen3-30b-a3b-gb200-8-mxfp8",
        "examples/models/qwen3-30b-a3b.json",
        8,
        512,
        "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1 "
        "--expert-model-parallel-size 8 --expert-tensor-parallel-size 1 --micro-batch-size 4 --global-batch-size 512 "
        "--fp8-dot-product-attention --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3",
        39936,
    ),
    # qwen/gb200/qwen3_moe.py qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config over the 256-GPU H100 base recipe
    # (account_for_embedding / loss_in_pipeline_split: 94 layers + 2 in 24 chunks of 4)
    Row(
        "qwen3-235b-a22b-gb200-256-mxfp8",
        "examples/models/qwen3-235b-a22b.json",
        256,
        8192,
        "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 8 --num-virtual-stages-per-pipeline-rank 3 "
        "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split --context-parallel-size 1 "
        "--expert-model-parallel-size 32 --expert-tensor-parallel-size 1 --micro-batch-size 1 "
        "--global-batch-size 8192 --fp8-dot-product-attention "
        "--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3",
        7280,
    ),
    # deepseek/gb200/deepseek_v3.py deepseek_v3_pretrain_256gpu_gb200_fp8mx_config: PP 4 x VP 4 with the recipe's
    # layout (recipes/deepseek/h100/deepseek_v3.py _get_deepseek_v3_pipeline_layout (4, 4): embedding and 4 layers,
    # 14 chunks of 4, the last layer with MTP and the loss), selective recomputation of mla_up_proj, the precision-aware
    # optimizer with BF16 moments and main gradients
    Row(
        "deepseek-v3-gb200-256-mxfp8",
        "examples/models/deepseek-v3.json",
        256,
        4096,
        "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 "
        "--pipeline-model-parallel-layout Etttt|(tttt|)*14tmL --context-parallel-size 1 "
        "--expert-model-parallel-size 64 --expert-tensor-parallel-size 1 --micro-batch-size 1 "
        "--global-batch-size 4096 --multi-latent-attention --mtp-num-layers 1 "
        "--moe-router-num-groups 8 --moe-router-group-topk 4 "
        "--recompute-granularity selective --recompute-modules mla_up_proj "
        "--use-precision-aware-optimizer --main-grads-dtype bf16 --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16",
        4912,
    ),
    # gpt_oss/gb200/gpt_oss.py gpt_oss_120b_pretrain_64gpu_gb200_fp8mx_config (recompute_modules emptied last)
    Row(
        "gpt-oss-120b-gb200-64-mxfp8",
        "examples/models/gpt-oss-120b.json",
        64,
        1280,
        "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1 "
        "--expert-model-parallel-size 64 --expert-tensor-parallel-size 1 --micro-batch-size 4 "
        "--global-batch-size 1280 --fp8-dot-product-attention --moe-router-load-balancing-type none",
        28672,
    ),
)


def row_workload(row: Row):
    """The row's step as moesim prepares it on GB200 (NVL72) GPUs, and the cluster."""
    job = parse_megatron_args(FULL_ITERATION_MXFP8 + row.flags)
    run = job.resolve(load_model(row.model), None, row.gpus)
    workload, cluster, _ = prepare(run.model, run.layout, row.gpus, "gb200", row.global_batch, 4096, None, True)
    return workload, cluster


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_no_gb200_row_is_refused_for_memory(row: Row) -> None:
    workload, cluster = row_workload(row)
    verdict = memory_verdict(peak_memory(workload), cluster.gpu.hbm_bytes)
    assert verdict.verdict is not Verdict.DOES_NOT_FIT, verdict.phrase()


def test_qwen3_30b_terms_by_hand() -> None:
    """Qwen3-30B-A3B on 8 GB200 (EP 8, PP 1, MBS 4 x 4096 = 16,384 tokens, 48 layers, hidden 2,048, 32 query and 4 KV
    heads of 128, 128 experts of width 768, top-8), term by term:
    - activations: the first micro-batch's forward runs alone, then each F&B pairs the next forward with its backward
      layer by layer: 49 layers at the peak. Per token per layer (MXFP8 GEMM inputs 1 byte and a scale byte per 32, the
      rest BF16): norm inputs 2 x 4,096, QKV input 2,048 x 33/32, Q/K/V 10,240, O 8,192 and its MXFP8 copy
      4,096 x 33/32, log-sum-exp 128, router input 4,096, FP32 scores 512; per routed copy, 8 of them in the paged
      stash's pages of 1.2 times the balanced count (not the 1.5 budget: the stash keeps the tokens received), TE's
      fused grouped MLP saves its FC1 and FC2 inputs column-wise MXFP8 and the SwiGLU input in BF16
      (transformer_engine/pytorch/ops/fused/grouped_mlp.py at NVIDIA/TransformerEngine d0067d0d):
      (2,048 + 768) x 33/32 + 2 x 1,536 bytes;
    - the head's logits for one micro-batch, BF16 under TE's fused loss: 16,384 x 151,936 x 2 bytes;
    - gradients BF16 (--grad-reduce-in-bf16), as many bytes as the BF16 weights."""
    workload, _ = row_workload(ROWS[0])
    peak = peak_memory(workload)
    mx = 33 / 32
    per_copy = (2048 + 768) * mx + 2 * 1536
    per_token_layer = 2 * 4096 + 2048 * mx + 10240 + 8192 + 4096 * mx + 128 + 4096 + 512 + 8 * 1.2 * per_copy
    assert sum(s.bytes_per_token for s in layer_saved(workload.model, workload.layout, False)) == pytest.approx(
        per_token_layer
    )
    logits = 16384 * 151936 * 2
    assert peak.activations_bytes == pytest.approx(16384 * 49 * per_token_layer + logits, rel=1e-12)
    assert peak.grads_bytes == peak.params_bytes
    assert peak.total_bytes / GIB == pytest.approx(140.6, abs=0.05)
