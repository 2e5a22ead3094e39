"""Megatron-LM's FLOP count (simulator.report.megatron_flops) on tiny models, against sums done by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.report.megatron_flops import MegatronArgs, megatron_args, megatron_flops, padded_vocab_size
from simulator.report.simulate import simulate
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec, model_preset

# 2 MoE layers, h 8, 2 heads of 4 with 1 KV group, 4 experts of width 16, top-2, vocabulary 128.
TINY = ModelSpec("tiny", 2, 8, 2, 1, 16, 4, 2, 128)


def test_gqa_moe_by_hand() -> None:
    """b 1, s 4. Per token, x 6 (3 GEMM passes x 2 FLOPs per multiply-add):
    experts  2 layers x top-2 x 3 SwiGLU GEMMs x 8 x 16 = 1,536 -> 9,216
    QKV + O  2 layers x (8 x (8 + 4 + 4) + 8 x 8)      =   384 -> 2,304
    logits   8 x 128                                   = 1,024 -> 6,144
    so 4 tokens x 17,664 = 70,656; core attention, causal: 2 layers x 6 x q 8 x b s^2 16 = 1,536."""
    args = megatron_args(TINY, layout_preset("megascale-moe"))
    assert args == MegatronArgs(2, 8, 2, 1, 4, 0, 16, 0, 2, 2, True, 128)
    assert megatron_flops(args, batch_size=1, seq_length=4) == 4 * (9216 + 2304 + 6144) + 1536 == 72192


def test_mla_dense_shared_mtp_by_hand() -> None:
    """MLA (no q LoRA, kv rank 4, qk 2 + rope 1, v 2), 1 dense layer (16) + 1 MoE layer (top-2 of width 4 and a
    shared width 4), 1 MTP module (MoE, as the last layer). b 1, s 2. Per token, x 6:
    FFN     3 x 8 x (16 x 1 dense + 4 x 2 x 2 routed + 4 x 2 shared)                = 960 -> 5,760
    MLA     3 layers x (q 8x2x3 + kv 4x(8 + 2x(2+2) + 1) + rope k 8x1 + o 2x2x8 = 156) -> 2,808
    MTP     3 x 8 + 2 x 8 x 8                                                        = 152 -> 912
    logits  8 x 128 x 2                                                              -> 12,288
    so 2 tokens x 21,768 = 43,536; core, causal: 3 layers x 6 x (2 x 3 / 2 + 2 x 2 / 2) x b s^2 4 = 360."""
    args = MegatronArgs(
        num_layers=2,
        hidden_size=8,
        num_attention_heads=2,
        num_query_groups=2,
        kv_channels=4,
        ffn_hidden_size=16,
        moe_ffn_hidden_size=4,
        moe_shared_expert_intermediate_size=4,
        moe_router_topk=2,
        num_moe_layers=1,
        last_layer_is_moe=True,
        padded_vocab_size=128,
        mtp_num_layers=1,
        multi_latent_attention=True,
        kv_lora_rank=4,
        qk_head_dim=2,
        qk_pos_emb_head_dim=1,
        v_head_dim=2,
    )
    assert megatron_flops(args, batch_size=1, seq_length=2) == 2 * (5760 + 2808 + 912 + 12288) + 360 == 43896


def test_no_swiglu_and_q_lora() -> None:
    """Without SwiGLU an FFN is 2 GEMMs; with q LoRA rank 2 the query term is 2 x (8 + 2 x 3 + 1) = 30 not 48."""
    base = MegatronArgs(1, 8, 2, 2, 4, 0, 4, 0, 1, 1, True, 128, multi_latent_attention=True, kv_lora_rank=4)
    base = replace(base, qk_head_dim=2, qk_pos_emb_head_dim=1, v_head_dim=2)
    assert megatron_flops(base, 1, 1) - megatron_flops(replace(base, swiglu=False), 1, 1) == 6 * 8 * 4 * 1
    assert megatron_flops(base, 1, 1) - megatron_flops(replace(base, q_lora_rank=2), 1, 1) == 6 * (48 - 30)


def test_vocabulary_padding() -> None:
    """Megatron pads the vocabulary to a multiple of 128 x TP; moesim's tp layout pads by its TP degree."""
    assert (padded_vocab_size(32064, 1), padded_vocab_size(32064, 8), padded_vocab_size(32000, 1)) == (
        32128,
        32768,
        32000,
    )
    assert megatron_args(TINY.with_(vocab_size=100), layout_preset("megatron-lm")).padded_vocab_size == 128 * 8


def test_report_divides_by_step_time_and_gpus() -> None:
    """Report.model_tflops_per_gpu = Megatron FLOPs of the step / step time / GPUs; tokens/s per GPU likewise."""
    layout = layout_preset("megascale-moe").with_(pp=2)
    report = simulate("mixtral-8x7b", layout, 16, global_batch=16, seq_len=1024)
    flops = megatron_flops(megatron_args(model_preset("mixtral-8x7b"), layout), 16, 1024)
    assert report.model_tflops_per_gpu == pytest.approx(flops / report.step_time_s / 16 / 1e12, rel=1e-12)
    assert report.tokens_per_s_per_gpu == pytest.approx(16 * 1024 / report.step_time_s / 16, rel=1e-12)
    assert "Megatron-LM's count" in report.summary()
