"""Unfused attention (layout attention_backend "unfused"): Megatron-Core's local DotProductAttention, TE's unfused
backend and Megatron-LM's attention before FlashAttention materialize the s x s scores. Their batched GEMMs compute
every pair (the causal mask applied, not skipped) and their softmax and dropout pass over the scores in HBM; the
probabilities are saved for backward (Korthikanti et al. Sec. 4.1's 5 a s^2 b)."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.kernels import attention_time_s, gemm_time_s, memory_time_s, unfused_attention_work
from simulator.memory.activations import layer_saved
from topologies.errors import ConfigError
from topologies.hardware import gpu_preset
from workloads.graph.op_lists import ATTENTION_BACKWARD_FACTOR
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_model import flags_model
from workloads.ops import AttentionShape, attention_flops
from workloads.specs.layouts import LayoutSpec
from workloads.specs.validation import check_step

# 2 sequences x 3 heads, 1,024 tokens, head dim 64, causal, attention dropout on
SHAPE = AttentionShape(64, 64, 1024, kernel="unfused", dropout=True)
FORWARD = attention_flops(2, 1024 * 1024, 3, 64, 64)
DENSE = flags_model(
    parse_megatron_args("--num-layers 2 --hidden-size 1024 --num-attention-heads 16 --vocab-size 1024").args
)


def test_the_gemms_compute_every_pair_and_the_scores_cross_hbm() -> None:
    gemms, score_bytes, kernels = unfused_attention_work(FORWARD, False, SHAPE)
    assert [(g.m, g.n, g.k, g.groups) for g in gemms] == [(1024, 1024, 64, 6), (1024, 64, 1024, 6)]
    assert sum(g.flops for g in gemms) == FORWARD  # all s^2 pairs: the causal half is computed too
    # softmax reads and writes 2 B a score, dropout reads 2, writes 2 and a 1 B mask: 9 B x 6 x 1024^2
    assert (score_bytes, kernels) == (9 * 6 * 1024**2, 2)
    gemms, score_bytes, kernels = unfused_attention_work(FORWARD * ATTENTION_BACKWARD_FACTOR, True, SHAPE)
    dp, dv, dq, dk = (1024, 1024, 64), (1024, 64, 1024), (1024, 64, 1024), (1024, 64, 1024)
    assert [(g.m, g.n, g.k) for g in gemms] == [dp, dv, dq, dk]
    assert sum(g.flops for g in gemms) == 2 * FORWARD  # dP, dV, dQ, dK: no recomputation of P
    # softmax backward reads its output and the gradient and writes one (6 B); dropout's 2 + 1 + 2
    assert (score_bytes, kernels) == (11 * 6 * 1024**2, 2)


def test_the_op_takes_its_gemms_and_its_score_passes() -> None:
    gpu, cal = gpu_preset("a100"), DEFAULT_CALIBRATION
    gemms, score_bytes, kernels = unfused_attention_work(FORWARD, False, SHAPE)
    expected = sum(gemm_time_s(g, gpu, cal) for g in gemms) + memory_time_s(score_bytes, kernels, gpu, cal)
    assert attention_time_s(FORWARD, False, gpu, cal, SHAPE) == pytest.approx(expected, rel=1e-12)
    fused = AttentionShape(64, 64, 1024, dropout=True)
    assert attention_time_s(FORWARD, False, gpu, cal, SHAPE) > 2 * attention_time_s(FORWARD, False, gpu, cal, fused)


def test_megatron_s_local_and_unfused_backends_select_it() -> None:
    def backend(flags: str) -> str:
        return parse_megatron_args(flags).layout_fields["attention_backend"]

    assert backend("--transformer-impl local") == "unfused"
    assert backend("--attention-backend unfused") == backend("--attention-backend local") == "unfused"
    assert backend("--attention-backend auto") == "cudnn" and backend("--attention-backend flash") == ""
    # a 2021-22 command line: that Megatron's own attention, unless it asked for FlashAttention
    assert backend("--checkpoint-activations --DDP-impl local") == "unfused"
    assert backend("--checkpoint-activations --use-flash-attn") == ""
    assert backend("--use-flash-attn") == "cudnn"  # no effect on Megatron-Core's TE layers


def test_the_scores_are_saved_unless_core_attention_is_recomputed() -> None:
    model = DENSE.with_(attention_dropout=0.1)
    layout = LayoutSpec("unfused", intra_size=2, attention="tp", attention_backend="unfused", recompute="none")
    saved = {s.name: s for s in layer_saved(model, layout, True, seq_len=2048)}
    # per local token (b s / t): the probabilities (2 B), the dropout mask (1 B) and output (2 B), every head and key
    assert saved["attn_scores"].bytes_per_token == 5 * 16 * 2048 and "attn_lse" not in saved
    assert saved["attn_scores"].module.rerun_by(frozenset({saved["attn_scores"].module}))


def test_unfused_attention_refuses_context_parallelism() -> None:
    model = DENSE
    layout = LayoutSpec(
        "unfused", intra_size=1, cp=2, pp=1, attention="tp", attention_backend="unfused", recompute="none"
    )
    with pytest.raises(ConfigError, match="unfused attention .* --context-parallel-size 1"):
        check_step(model, layout, 2, 8, 8, 4096)
