"""experiments.validation.moe_layer_check: the SonicMoE Fig. 14 comparison's FLOP count, implied times and layer span."""

from __future__ import annotations

import pytest

from experiments.validation.moe_layer_check import POINTS, _moe_span_s, forward_flops, megatron_args, published_s
from simulator.engine.timing import OpTime, TaskTime
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import GEMM, MEMORY, Module, Op

# 30B, d 4096, n 512, E 128, K 8: 32,768 tokens, Megatron 223 TFLOP/s forward, 215 backward.
POINT = POINTS[7]


def test_point_is_the_30b_e128_configuration():
    assert (POINT.tokens, POINT.hidden, POINT.width, POINT.experts, POINT.top_k) == (32768, 4096, 512, 128, 8)


def test_the_layer_runs_transformer_configs_defaults():
    """benchmark_megatron_te.py at cbcb12a leaves the dispatcher (commented out) and every fusion at
    TransformerConfig's defaults: allgather, unfused permutation, router and SwiGLU; 16 sequences of 2,048."""
    fields = parse_megatron_args(megatron_args(POINT)).layout_fields
    assert (fields["fused_permute"], fields["fused_activation"], fields["router_fusion"]) == (False, False, False)
    assert (fields["token_dispatcher"], fields["micro_batch"], fields["expert_gemm"]) == (
        "allgather",
        16,
        "multi_stream",
    )


def test_forward_flops_count_the_swiglu_up_and_down_projections():
    """6 T K d n = 6 x 32,768 x 8 x 4,096 x 512 = 3,298,534,883,328."""
    assert forward_flops(POINT) == 3_298_534_883_328.0


def test_published_times_follow_the_benchmark_flop_convention():
    """Forward 3.2985e12 / 223e12 = 14.7916 ms; backward twice the FLOPs at 215: 30.6840 ms."""
    fwd, bwd = published_s(POINT)
    assert fwd == pytest.approx(3_298_534_883_328.0 / 223e12, rel=1e-12)
    assert bwd == pytest.approx(6_597_069_766_656.0 / 215e12, rel=1e-12)
    assert fwd == pytest.approx(14.7916e-3, abs=1e-7)


def test_span_covers_only_the_moe_layer_ops():
    """A norm before (0-1 s) and an attention-side op after (9-10 s) are left out: MoE ops run 2-3 and 4-7."""
    ops = (
        OpTime(Op("ffn_norm", MEMORY, "compute", module=Module.LAYERNORM), 0.0, 1.0),
        OpTime(Op("expert_fc13", GEMM, "compute", module=Module.MOE), 2.0, 3.0),
        OpTime(Op("swiglu", MEMORY, "compute", module=Module.MOE_ACT), 4.0, 7.0),
        OpTime(Op("o_proj", GEMM, "compute"), 9.0, 10.0),
    )
    assert _moe_span_s(TaskTime(10.0, 6.0, {}, ops)) == 5.0


def test_excess_decomposition_recovers_a_known_split(monkeypatch):
    """Measured = simulated + 2 s per TB of 2 T K d bytes + 3 s per PFLOP: the split comes back as (2, 3)."""
    import experiments.validation.moe_layer_check as check

    def excess(point, direction):
        routed_tb = 2.0 * point.tokens * point.top_k * point.hidden / 1e12
        pflop = (1 + direction) * forward_flops(point) / 1e15
        return 2.0 * routed_tb + 3.0 * pflop

    monkeypatch.setattr(check, "simulated_s", lambda point, calibration=None: (1.0, 1.0))
    monkeypatch.setattr(check, "published_s", lambda point: (1.0 + excess(point, 0), 1.0 + excess(point, 1)))
    for per_tb, per_pflop in check.excess_decomposition().values():
        assert per_tb == pytest.approx(2.0, rel=1e-9)
        assert per_pflop == pytest.approx(3.0, rel=1e-9)
