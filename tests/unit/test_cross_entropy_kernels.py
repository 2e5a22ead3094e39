"""TE's cross-entropy kernels after the LM head (workloads/recipes/cross_entropy.py), by hand, against the assumed passes."""

from __future__ import annotations

import pytest

from simulator.costs.kernels import compute_time_s
from tests.toys import megatron_field, toy_calibration, toy_gpu
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.recipes.layers import head_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

# A vocabulary of 1,000 over 1,024 tokens: 1,024,000 logits on one GPU.
MODEL = ModelSpec("m", 1, 1024, 8, 8, 512, 8, 2, 1000)
SEQ = 1024


def _loss_ops(cross_entropy: str, intra_size: int = 1, micro_batch: int = 1):
    layout = LayoutSpec(
        "t", attention="tp", intra_size=intra_size, micro_batch=micro_batch, cross_entropy=cross_entropy
    )
    steps = [(0, head_recipe(MODEL, layout, SEQ))]
    fwd = next(op for op in forward_ops(steps, layout) if op.name == "cross_entropy")
    bwd = next(op for op in backward_ops(steps, layout) if op.name == "cross_entropy.bwd")
    return fwd, bwd


def test_te_kernels_by_hand() -> None:
    """TE: forward reads the BF16 logits twice and writes their gradient once (6 B x 1,024,000) in 6 launches;
    backward scales that gradient in place (4 B) in 2. The assumed passes: 3 x 4 B forward, twice that backward,
    one kernel each."""
    fwd, bwd = _loss_ops("te")
    assert (fwd.kernels, fwd.mem_bytes, bwd.kernels, bwd.mem_bytes) == (6, 6_144_000, 2, 4_096_000)
    fwd, bwd = _loss_ops("")
    assert (fwd.kernels, fwd.mem_bytes, bwd.kernels, bwd.mem_bytes) == (1, 12_288_000, 1, 24_576_000)


def test_sequence_shards_split_the_logits() -> None:
    """TP 2: each GPU holds half the tokens' logits (moesim's head runs on the sequence shard)."""
    fwd, bwd = _loss_ops("te", intra_size=2)
    assert (fwd.mem_bytes, bwd.mem_bytes) == (3_072_000, 2_048_000)


def test_gpu_time_by_hand() -> None:
    """Toy GPU, 1e12 B/s, 1 us per kernel: 6 us + 6.144 us forward, 2 us + 4.096 us backward."""
    cal, gpu = toy_calibration(kernel_overhead_s=1e-6), toy_gpu()
    fwd, bwd = _loss_ops("te")
    assert compute_time_s(fwd, gpu, cal) == pytest.approx(12.144e-6, rel=1e-12)
    assert compute_time_s(bwd, gpu, cal) == pytest.approx(6.096e-6, rel=1e-12)


def test_transposes_copy_with_several_sequences() -> None:
    """2 sequences per micro-batch: the labels' and the loss's transposes are copies (2 more forward launches,
    the loss gradient's 1 more backward) over twice the logits."""
    fwd, bwd = _loss_ops("te", micro_batch=2)
    assert (fwd.kernels, fwd.mem_bytes, bwd.kernels, bwd.mem_bytes) == (8, 12_288_000, 3, 8_192_000)


def test_head_recipe_differs_only_in_the_loss() -> None:
    """Differential: the final norm and LM head are the same steps under either loss."""
    plain = head_recipe(MODEL, LayoutSpec("t", attention="tp", intra_size=1), SEQ)
    te = head_recipe(MODEL, LayoutSpec("t", attention="tp", intra_size=1, cross_entropy="te"), SEQ)
    assert plain[:-1] == te[:-1] and plain[-1] != te[-1]


@pytest.mark.parametrize(
    "flags, impl",
    [
        ("--cross-entropy-loss-fusion --cross-entropy-fusion-impl te", "te"),
        ("--cross-entropy-loss-fusion --cross-entropy-fusion-impl native", ""),
        ("--cross-entropy-fusion-impl te", ""),
        ("--cross-entropy-loss-fusion", ""),
    ],
)
def test_megatron_flags(flags: str, impl: str) -> None:
    """Both flags give TE's kernels; the fused "native" impl, or the impl without the fusion, keep the assumed."""
    assert megatron_field(flags, "cross_entropy") == impl
