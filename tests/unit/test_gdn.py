"""Gated DeltaNet layers (Qwen3-Next, Qwen3.5 / 3.6): the config.json reader, the parameter count against the published
one, the recurrence's measured time, the layer's ops, Megatron's FLOP count and a whole step's share of the rule."""

from __future__ import annotations

import pytest

from experiments.common.stage_costs import busiest_stage
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.delta_rule import GB200_FLA, H200_FLA, delta_rule_time_s
from simulator.report.megatron_flops import megatron_args, megatron_flops
from simulator.report.simulate import prepare
from topologies.errors import ConfigError
from topologies.hardware import gpu_preset
from workloads.inputs.huggingface.config import load_hf_config, model_from_hf_dict
from workloads.inputs.megatron import parse_megatron_args
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec

QWEN3_NEXT = load_hf_config("examples/models/qwen3-next-80b-a3b.json")


def test_qwen3_next_is_two_blocks_a_layer_with_every_fourth_mixer_attention() -> None:
    assert QWEN3_NEXT.num_layers == 96 and QWEN3_NEXT.hybrid_pattern == "GEGEGE*E" * 12
    assert (QWEN3_NEXT.gdn_key_heads, QWEN3_NEXT.gdn_value_heads, QWEN3_NEXT.gdn_key_head_dim) == (16, 32, 128)
    assert QWEN3_NEXT.attention_output_gate and QWEN3_NEXT.qk_layernorm and QWEN3_NEXT.shared_ffn_size == 512


def test_qwen3_next_parameters_are_the_published_count() -> None:
    """Qwen3-Next-80B-A3B: 79,674,391,296 parameters, 3,874,929,408 without the inactive experts (the checkpoint's
    tensors, as a public test transcribes Qwen/Qwen3-Coder-Next's config.json and headers). moesim counts every one
    but the modules too small to time: per attention layer the q / k norms (2 x 256), per MoE layer the shared
    expert's gate (2,048), and the final norm; its active count also leaves out the routers and the layers' norms."""
    unmodelled = 12 * 2 * 256 + 48 * 2048 + 2048
    assert QWEN3_NEXT.total_params + unmodelled == 79_674_391_296
    router, norms = 48 * 2048 * 512, 96 * 2048
    assert QWEN3_NEXT.active_params + router + norms + unmodelled == 3_874_929_408


def test_qwen3_5_reads_its_text_config_and_layer_types() -> None:
    text = {
        "model_type": "qwen3_5_moe_text",
        "hidden_size": 2048,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "vocab_size": 248320,
        "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"],
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "mtp_num_hidden_layers": 1,
    }
    model = model_from_hf_dict({"model_type": "qwen3_5_moe", "text_config": text}, "qwen3.5")
    assert model.hybrid_pattern == "GE*EGE*E" and model.mtp_layers == 1
    dense = model_from_hf_dict(
        {**text, "model_type": "qwen3_5_text", "num_experts": 0, "intermediate_size": 17408}, "d"
    )
    assert dense.hybrid_pattern == "G-*-G-*-" and dense.dense_ffn_size == 17408
    with pytest.raises(ConfigError, match="layer_types"):
        model_from_hf_dict({**text, "layer_types": ["linear_attention"] * 3 + ["sliding_attention"]}, "x")


@pytest.mark.parametrize(
    ("table", "heads", "tokens", "backward", "ms"),
    [
        (H200_FLA, 32, 8192, False, 0.472),  # FlashQLA's H200 file, 35B TP1 row, FLA column
        (H200_FLA, 8, 32768, False, 0.902),
        (GB200_FLA, 16, 32768, True, 4.178),  # GB200 hk8_hv16 32k_1seq, FLA
        (GB200_FLA, 64, 2048, False, 0.208),
    ],
)
def test_the_rule_is_fla_at_its_measured_points(table, heads: int, tokens: int, backward: bool, ms: float) -> None:
    gpu = gpu_preset("h200" if table is H200_FLA else "gb200")
    assert delta_rule_time_s(tokens, heads, 128, 128, backward, gpu) == pytest.approx(ms * 1e-3, rel=1e-12)


def test_between_and_beyond_the_measured_points() -> None:
    h100, b200 = gpu_preset("h100"), gpu_preset("b200")
    # linear in heads between 16 and 32 (forward, 8,192 tokens: 0.316 and 0.472 ms); the H100 takes the H200's table
    assert delta_rule_time_s(8192, 24, 128, 128, False, h100) == pytest.approx((0.316 + 0.472) / 2 * 1e-3)
    # log-log in tokens between 8,192 and 16,384 (0.472, 0.930 ms), proportional beyond 32,768 (1.890 ms)
    assert delta_rule_time_s(8192 * 2**0.5, 32, 128, 128, False, h100) == pytest.approx((0.472 * 0.930) ** 0.5 * 1e-3)
    assert delta_rule_time_s(65536, 32, 128, 128, False, h100) == pytest.approx(2 * 1.890e-3)
    # along the last slope above 32 heads in backward (16 -> 32: 0.957 -> 1.444 ms at 8,192), the fewest's below
    assert delta_rule_time_s(8192, 64, 128, 128, True, h100) == pytest.approx((1.444 + 2 * (1.444 - 0.957)) * 1e-3)
    assert delta_rule_time_s(8192, 2, 128, 128, True, b200) == delta_rule_time_s(8192, 4, 128, 128, True, b200)
    # another head dimension scales with d_k d_v
    assert delta_rule_time_s(8192, 32, 64, 128, False, h100) == pytest.approx(0.5 * 0.472e-3)


def test_the_gdn_layer_splits_its_heads_over_tp() -> None:
    layout = LayoutSpec("t", intra_size=2, ffn="ep", ep=2, micro_batch=1)
    steps = {step.name: step for step in layer_recipe(QWEN3_NEXT, layout, 4096, 8, block="gdn")}
    # in_proj: q, k (16 x 128 each), v and z (32 x 128 each), beta and the decay input per value head; halved by TP
    assert steps["gdn_in_proj"].gemm.n == (2 * 2048 + 2 * 4096 + 2 * 32) // 2
    assert steps["gdn_out_proj"].gemm.k == 4096 // 2
    rule = steps["gdn_delta_rule"]
    assert (rule.delta_rule.tokens, rule.delta_rule.value_heads) == (4096, 16)
    assert rule.scan_flops == 2 * 4096 * 16 * 128**2 * 4  # Megatron's 4 d_v^2 per value head and token
    assert steps["gdn_conv1d"].mem_bytes == 2 * 4096 * (2 * 1024 + 2048) * 2  # read and written, BF16


def test_megatron_counts_a_gdn_layer_as_gdn_layer_flops() -> None:
    """One G block more, every other block the same: Megatron-LM's gdn_layer_flops (training.py at d98e8a64) times
    3, 2 x tokens x (h (2 qk + 2 v + 2 hv) + 4 (2 qk + v) + hv 4 d_v^2 + h v)."""
    layout = LayoutSpec("t", ffn="ep", ep=1)
    one, two = (QWEN3_NEXT.with_(num_layers=len(p), hybrid_pattern=p) for p in ("E", "GE"))
    tokens, h, qk, v, hv = 4096, 2048, 2048, 4096, 32
    gdn = 2 * tokens * (h * (2 * qk + 2 * v + 2 * hv) + 4 * (2 * qk + v) + hv * 4 * 128**2 + h * v)
    counts = [megatron_flops(megatron_args(model, layout), 1, tokens) for model in (one, two)]
    assert counts[1] - counts[0] == 3 * gdn


def test_a_step_charges_each_gdn_layer_the_measured_rule() -> None:
    """Qwen3-Next on 64 GB200, PP 1: every micro-batch of 4,096 tokens runs 36 GDN layers, each FLA's forward (0.250
    ms at 32 heads) and backward (1.552 ms at 8,192 tokens, taken proportional below: 0.776)."""
    flags = (
        "--expert-model-parallel-size 64 --micro-batch-size 1 --bf16 --moe-grouped-gemm --moe-token-dispatcher-type "
        "alltoall --use-distributed-optimizer --swiglu --untie-embeddings-and-output-weights"
    )
    run = parse_megatron_args(flags).resolve(QWEN3_NEXT, None, 64)
    workload, cluster, _ = prepare(run.model, run.layout, 64, "gb200", 1024, 4096, None, True)
    costs = busiest_stage(workload, cluster, DEFAULT_CALIBRATION)
    assert costs.compute_s["GDN delta rule"] == pytest.approx(36 * (0.250 + 0.776) * 1e-3, rel=1e-9)


def test_a_gpt_form_layout_and_layer_count_name_two_blocks_a_layer() -> None:
    """Megatron-Bridge runs Qwen3-Next as a GPT model (48 layers, its layout "Et*4|(t*7|)*5t*8|tmL"); the config.json
    gives 96 blocks, mixer then MoE: the GPT form's counts place two blocks each, the block form the same split."""
    base = "--pipeline-model-parallel-size 2 --expert-model-parallel-size 32 --mtp-num-layers 1 --bf16"
    gpt = parse_megatron_args(f'{base} --num-layers 48 --pipeline-model-parallel-layout "Et*4|(t*7|)*5t*8|tmL"')
    blocks = parse_megatron_args(f'{base} --pipeline-model-parallel-layout "Et*8|(t*14|)*5t*16|t*2mL"')
    model = QWEN3_NEXT.with_(mtp_layers=1)
    runs = [flags.resolve(model, None, 64) for flags in (gpt, blocks)]
    assert runs[0].model.num_layers == 96 and runs[0].layout == runs[1].layout
    assert runs[0].layout.block_layers == (8, 14, 14, 14, 14, 14, 16, 2)
