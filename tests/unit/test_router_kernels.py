"""Megatron-Core's router kernels after the gating GEMM (workloads/recipes/router.py): the random logits of benchmark
routing, TE's fused top-k and the fused aux loss, with their launches and bytes counted by hand."""

from __future__ import annotations

import pytest

from simulator.streams.op_costs import launch_times_s
from tests.toys import toy_calibration, toy_gpu, toy_task_s
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import Role
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

# 8 experts, hidden 1,024; one GPU holds all 1,024 tokens of the micro-batch: 1,024 x 8 = 8,192 router scores.
MODEL = ModelSpec("m", 1, 1024, 8, 8, 512, 8, 2, 64)
SEQ = 1024
PLAIN = LayoutSpec(
    "t", attention="tp", intra_size=1, ffn="ep", intra_op_overlap=False, inter_op_overlap=False, recompute="none"
)
MEGATRON = PLAIN.with_(router_fusion=True, router_aux_loss=True, router_random_logits=True)
ROUTER_STEPS = ("router", "router_random_logits", "router_topk", "router_aux_loss")


def _steps(layout: LayoutSpec):
    return layer_recipe(MODEL, layout, SEQ, 8)


def _by_name(ops, name: str):
    return next(op for op in ops if op.name == name)


def test_router_steps_in_megatron_order() -> None:
    """Gating GEMM, the logits replaced by noise, TE's fused top-k, then the aux loss on the same logits."""
    names = [s.name for s in _steps(MEGATRON) if s.name.startswith("router")]
    assert names == list(ROUTER_STEPS)


def test_kernels_and_bytes_by_hand() -> None:
    """8,192 scores. Random logits: clone (2 + 2 B) and normal_ (2 B) = 49,152 B, 2 kernels, none backward.
    Fused top-k: reads BF16 logits, writes BF16 probs, a bool map and an FP32 intermediate (9 B) = 73,728 B,
    1 kernel; backward reads map, intermediate and BF16 grad, writes the BF16 logits grad (9 B) = 73,728 B.
    Aux loss: scores kernel 2 + 4 + 1 + 4 B, map sum 1 B, loss kernel 4 B = 16 B -> 131,072 B in 1 + 1 + 3
    (memset, kernel, convert) + 2 (logging) = 7 launches; backward 4 B (loss grad) + 10 B (scores grad) + 6 B
    (sum of the two logits grads) = 163,840 B in 2 (autoscaler) + 1 + 1 + 1 = 5 kernels."""
    steps = [(0, _steps(MEGATRON))]
    fwd, bwd = forward_ops(steps, MEGATRON), backward_ops(steps, MEGATRON)
    got = {name: (_by_name(fwd, name).kernels, _by_name(fwd, name).mem_bytes) for name in ROUTER_STEPS[1:]}
    assert got == {
        "router_random_logits": (2, 49_152),
        "router_topk": (1, 73_728),
        "router_aux_loss": (7, 131_072),
    }
    back = {op.name: (op.kernels, op.mem_bytes) for op in bwd if op.name.startswith("router_")}
    assert back == {"router_topk.bwd": (1, 73_728), "router_aux_loss.bwd": (5, 163_840)}


def test_without_the_flags_the_recipe_is_unchanged() -> None:
    """Differential: the flags off give the former recipe exactly; on, only the router's steps differ."""
    plain, megatron = _steps(PLAIN), _steps(MEGATRON)
    others = [s for s in megatron if not s.name.startswith("router_")]
    assert others == [s for s in plain if s.name != "router_topk"]
    assert [s.name for s in plain if s.name.startswith("router")] == ["router", "router_topk"]
    # the aux loss needs the fused router: its unfused kernels are not declared
    unfused = [s.name for s in _steps(MEGATRON.with_(router_fusion=False)) if s.name.startswith("router")]
    assert unfused == ["router", "router_random_logits", "router_topk"]


def test_backward_chain_skips_the_pass_through() -> None:
    """The random logits' backward hands the gradient on: the gating GEMM's dgrad follows the top-k's backward
    directly, which follows the aux loss's."""
    steps = [(0, _steps(MEGATRON))]
    bwd = backward_ops(steps, MEGATRON)
    index = {op.name: i for i, op in enumerate(bwd)}
    assert "router_random_logits.bwd" not in index
    assert bwd[index["router_topk.bwd"]].deps == (index["router_aux_loss.bwd"],)
    assert bwd[index["router.dgrad"]].deps == (index["router_topk.bwd"],)
    assert {bwd[index[name]].role for name in ("router_topk.bwd", "router_aux_loss.bwd")} == {Role.INPUT_GRAD}


def test_host_launches_added_per_layer() -> None:
    """At 10 us per launch the host issues 2 + 7 more kernels per forward (90 us) and 5 more per backward
    (50 us); every other op launches as before."""
    cal = toy_calibration(host_launch_s=10e-6)
    for build, extra_s in ((forward_ops, 90e-6), (backward_ops, 50e-6)):
        plain = build([(0, _steps(PLAIN))], PLAIN)
        megatron = build([(0, _steps(MEGATRON))], MEGATRON)
        added = sum(launch_times_s(tuple(megatron), cal, toy_gpu())) - sum(launch_times_s(tuple(plain), cal, toy_gpu()))
        assert added == pytest.approx(extra_s, abs=1e-12)


def _duration_s(layout: LayoutSpec, host_launch_s: float) -> float:
    """One layer's forward on the toy GPU (1e12 B/s HBM, 1 us per kernel on the GPU)."""
    cal = toy_calibration(host_launch_s=host_launch_s, kernel_overhead_s=1e-6)
    return toy_task_s(tuple(forward_ops([(0, _steps(layout))], layout)), cal)


def test_gpu_time_added_by_hand() -> None:
    """No host cost: the forward grows by the new kernels' GPU time, 9 x 1 us + (49,152 + 131,072) B / 1e12 B/s,
    and by the top-k's bytes (73,728 B instead of the former 3 x 4 B x 8,192 = 98,304 B: -24,576 B)."""
    added = _duration_s(MEGATRON, 0.0) - _duration_s(PLAIN, 0.0)
    assert added == pytest.approx(9e-6 + (49_152 + 131_072 - 24_576) / 1e12, rel=1e-9)


def test_megatron_flags() -> None:
    """--moe-router-fusion and --moe-router-force-load-balancing switch their kernels on; the aux loss needs the
    aux_loss type (Megatron's default) with a coefficient > 0, paired by position when several types are given;
    losses whose kernels are not declared are named in the notes."""

    def fields(flags: str):
        job = parse_megatron_args(flags)
        keys = ("router_fusion", "router_aux_loss", "router_random_logits")
        return tuple(job.layout_fields[key] for key in keys), job.notes

    assert fields("--moe-router-fusion --moe-aux-loss-coeff 1e-3")[0] == (True, True, False)
    assert fields("--moe-router-fusion")[0] == (True, False, False)  # coefficient 0 by default
    assert fields("--moe-router-force-load-balancing --moe-router-load-balancing-type none")[0] == (False, False, True)
    both = fields("--moe-router-load-balancing-type seq_aux_loss aux_loss --moe-aux-loss-coeff 1e-4 0")
    assert both[0] == (False, False, False)
    assert any("seq_aux_loss" in note for note in both[1])
    unfused = fields("--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3")
    assert unfused[0] == (False, True, False) and any("unfused router" in note for note in unfused[1])
