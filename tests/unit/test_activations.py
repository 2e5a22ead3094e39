"""Saved activations of Megatron-Core layers (simulator.memory.activations), tensor by tensor, computed by hand."""

from __future__ import annotations

import pytest

from simulator.memory.activations import layer_saved, megatron_layer_bytes
from simulator.memory.per_gpu import layer_activation_bytes
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

# Dense, MHA, SwiGLU of width 8h/3: its MLP keeps 2 + 4F/h + 2F/h = 18 s b h bytes, as Korthikanti's GeLU MLP
DENSE = ModelSpec("dense", 2, 3072, 24, 24, 0, 0, 0, 32000, dense_ffn_size=8192)
TP4 = LayoutSpec("tp4", attention="tp", ffn="tp", intra_size=4, pp=1, recompute="none")


def test_bf16_dense_layer_is_korthikantis_34_less_the_dropout_masks() -> None:
    # Korthikanti et al. Sec. 4.1 with sequence parallelism: 34 s b h / t bytes per layer; no dropout masks
    # (2 s b h / t) and no 5 a s^2 b term under FlashAttention, which keeps its FP32 log-sum-exp (4 a s b / t).
    tokens = 4096 / 4  # b s / t
    expected = tokens * (32 * 3072 + 4 * 24)
    assert megatron_layer_bytes(DENSE, TP4, 4096, dense=True) == pytest.approx(expected, rel=1e-12)
    assert megatron_layer_bytes(DENSE, TP4, 4096, dense=True) == 100_761_600


def test_fp8_saves_gemm_inputs_at_one_byte() -> None:
    # QKV input 2h -> h, fc1 input 2h -> h, fc2 input 2F -> F, plus the output projection's FP8 copy of O (h)
    fp8 = TP4.with_(gemm_dtype="fp8")
    per_token = 32 * 3072 + 4 * 24 - 3072 - 3072 - 8192 + 3072
    assert megatron_layer_bytes(DENSE, fp8, 4096, dense=True) == pytest.approx(1024 * per_token, rel=1e-12)


def test_full_recompute_keeps_the_layer_input() -> None:
    full = TP4.with_(recompute="full")
    assert megatron_layer_bytes(DENSE, full, 4096, dense=True) == 1024 * 2 * 3072


def test_cp_divides_the_tokens() -> None:
    assert megatron_layer_bytes(DENSE, TP4.with_(cp=2), 4096, dense=True) == 100_761_600 / 2


# MoE: h 1024, 8 heads of 128 with 2 KV heads, 16 experts of width 512, top-4, one shared expert of 512
MOE = ModelSpec("moe", 2, 1024, 8, 2, 512, 16, 4, 32000, num_shared_experts=1)
EP = LayoutSpec("ep", attention="tp", ffn="ep", intra_size=2, ep=4, pp=1, recompute="none", dropless=True)
FP8_EP = EP.with_(gemm_dtype="fp8")
ATTENTION = 2048 + 1024 + 2 * (1024 + 2 * 256) + 2048 + 4 * 8 + 1024  # norm in, QKV in, Q K V, O, LSE, FP8 O
ROUTED = 4 * 1024 + 4 * 2 * 2 * 512 + 4 * 512  # k copies: FP8 inputs, fc1 outputs (2F, BF16), FP8 fc2 inputs
SHARED = 1024 + 2 * 2 * 512 + 512  # FP8 fc1 input, fc1 output, FP8 fc2 input
MOE_LAYER = ATTENTION + 2048 + 2048 + 4 * 16 + ROUTED + SHARED  # + ffn norm input, router input, FP32 scores


def test_fp8_moe_layer_by_hand() -> None:
    assert MOE_LAYER == 31_328
    assert megatron_layer_bytes(MOE, FP8_EP, 2048, dense=False) == 1024 * MOE_LAYER


@pytest.mark.parametrize(
    ("modules", "freed"),
    [
        (("moe_act",), 4 * 512),  # the activation's output = fc2's input
        (("layernorm",), 2048),  # pre_mlp_layernorm's output, the router's input
        (("shared_experts",), SHARED),
        (("moe",), 4 * 16 + ROUTED + SHARED),  # everything in the MoE layer but its input
        (("core_attn",), 0),  # FlashAttention keeps no s x s tensor to free
    ],
)
def test_selective_recompute_frees_its_modules_tensors(modules: tuple[str, ...], freed: int) -> None:
    layout = FP8_EP.with_(recompute="selective", recompute_modules=modules)
    assert megatron_layer_bytes(MOE, layout, 2048, dense=False) == 1024 * (MOE_LAYER - freed)


def test_capacity_padding_and_etp_scale_the_routed_copies() -> None:
    padded = EP.with_(dropless=False, capacity_factor=1.5)
    routed_bf16 = 4 * 2 * 1024 + 4 * 2 * 2 * 512 + 4 * 2 * 512
    base = megatron_layer_bytes(MOE, EP, 2048, dense=False)
    assert megatron_layer_bytes(MOE, padded, 2048, dense=False) - base == 1024 * 0.5 * routed_bf16
    # ETP 2: each copy gathered onto both ETP GPUs at half the width: inputs double, fc1 / fc2 tensors stay
    etp = EP.with_(etp=2)
    assert megatron_layer_bytes(MOE, etp, 2048, dense=False) - base == 1024 * 4 * 2 * 1024


MLA_DIMS = {"kv_lora_rank": 128, "q_lora_rank": 256, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64}
MLA = ModelSpec(
    "mla", 2, 1024, 8, 8, 512, 16, 4, 32000, attention="mla", num_dense_layers=1, dense_ffn_size=2048, **MLA_DIMS
)


def test_mla_up_projection_recompute_frees_the_latent_norms_and_q_k_v() -> None:
    tp2 = LayoutSpec("tp2", attention="tp", ffn="ep", intra_size=2, pp=1, recompute="none", dropless=True)
    names = [s.name for s in layer_saved(MLA, tp2, dense=True)][:7]
    assert names == [
        "attn_norm_input",
        "attn_norm_output",
        "latents",
        "up_proj_inputs",
        "q_k_v",
        "attn_out",
        "attn_lse",
    ]
    up_inputs = 2 * 2 * (256 + 128)  # the gathered latents (t = 2 x local), BF16
    q_k_v = 2 * 8 * (2 * (64 + 32) + 64)
    recomputed = tp2.with_(recompute="selective", recompute_modules=("mla_up_proj",))
    freed = megatron_layer_bytes(MLA, tp2, 2048, dense=True) - megatron_layer_bytes(MLA, recomputed, 2048, dense=True)
    assert freed == 1024 * (up_inputs + q_k_v)


def test_megascale_layouts_keep_the_papers_formula() -> None:
    # SP attention (MegaScale-MoE's own system): (2n + 2k + 3kf + 12 + 5/m) bsh/n BF16 elements, Sec. 4.1
    sp = LayoutSpec("sp", attention="sp", ffn="ep", intra_size=2, pp=1, recompute="none", dropless=True)
    units = 2 * 2 + 2 * 4 + 3 * 4 * 0.5 + 12 + 5 / 4
    assert layer_activation_bytes(MOE, sp, 2048, dense=False) == pytest.approx(units * 1024 * 1024 * 2)
