"""The memory verdict (simulator/memory/verdict.py) by hand: "fits" within 80% of HBM (arXiv 2411.06465), "does
not fit" only when the step exceeds HBM with its activations 25% lower, "may not fit" between; a refusal only for
"does not fit", with Megatron-LM flags to try that are not already set."""

from __future__ import annotations

import pytest

from simulator.memory.per_gpu import GIB, MemoryBreakdown
from simulator.memory.verdict import ACTIVATION_UNCERTAINTY, FITS_FRACTION, Verdict, memory_verdict
from workloads.specs.hints import in_megatron_words, memory_hint
from workloads.specs.layouts import LayoutSpec

HBM = 80 * GIB


def breakdown(states_gib: float, activations_gib: float) -> MemoryBreakdown:
    """Weights, gradients and optimizer in params, activations beside them, no buffers."""
    return MemoryBreakdown(0, states_gib * GIB, 0.0, 0.0, activations_gib * GIB, 0.0)


@pytest.mark.parametrize(
    ("states", "activations", "verdict"),
    [
        (40, 24, Verdict.FITS),  # 64 GiB = 80% of 80: fits
        (40, 24.1, Verdict.MAY_NOT_FIT),  # just above 80%
        (40, 52, Verdict.MAY_NOT_FIT),  # 92 GiB; 92 - 13 = 79 GiB <= 80 with the activations 25% lower
        (40, 53.2, Verdict.MAY_NOT_FIT),  # 93.2 - 13.3 = 79.9 GiB: just within
        (40, 54, Verdict.DOES_NOT_FIT),  # 94 - 13.5 = 80.5 GiB > 80
        (80.5, 0, Verdict.DOES_NOT_FIT),  # the states alone (exact) exceed HBM
    ],
)
def test_verdict_bounds_by_hand(states: float, activations: float, verdict: Verdict) -> None:
    result = memory_verdict(breakdown(states, activations), HBM)
    assert result.verdict is verdict
    assert result.low_bytes == pytest.approx((states + (1 - ACTIVATION_UNCERTAINTY) * activations) * GIB)
    assert FITS_FRACTION == 0.80 and ACTIVATION_UNCERTAINTY == 0.25


def test_the_phrase_gives_the_margin() -> None:
    assert memory_verdict(breakdown(40, 20), HBM).phrase() == "fits: 60.0 GiB per GPU, within 80% of the 80.0 GiB HBM"
    phrase = memory_verdict(breakdown(40, 48), HBM).phrase()
    assert phrase.startswith("may not fit: 88.0 GiB per GPU (stage 0), 76.0 GiB with the activations 25% lower")
    assert "allocator fragmentation are not counted" in phrase


def test_the_hint_skips_recompute_modules_already_set() -> None:
    """GPT-OSS's recipe already recomputes layernorm and moe_act (SAR's Megatron flags): the next cut is full
    recomputation, not the flags the job has."""
    terms = {"params": 8.2, "grads": 8.2, "optimizer": 20.6, "activations": 58.0, "buffers": 0.4}
    selective = LayoutSpec(name="x", recompute="selective", recompute_modules=("layernorm", "moe_act"))
    assert "--set recompute=full" in memory_hint(terms, selective)
    assert "--set recompute=sar" in memory_hint(terms, selective.with_(recompute_modules=("layernorm",)))


def test_a_dense_model_is_told_the_selective_recomputation_megatron_has_for_it() -> None:
    """SAR's Megatron flags recompute the MoE activation (--recompute-modules moe_act), which a dense model lacks:
    its hint recomputes the MLP, in Megatron's words --recompute-modules core_attn layernorm mlp, then full."""
    terms = {"params": 15.0, "grads": 29.9, "optimizer": 11.2, "activations": 79.8, "buffers": 0.0}
    selective = LayoutSpec(name="x", recompute="selective", recompute_modules=("core_attn",))
    hint = in_megatron_words(memory_hint(terms, selective, moe=False))
    assert "--recompute-modules core_attn layernorm mlp" in hint and "moe_act" not in hint
    with_mlp = selective.with_(recompute_modules=("core_attn", "mlp"))
    assert "--recompute-granularity full" in in_megatron_words(memory_hint(terms, with_mlp, moe=False))
    assert "moe_act layernorm" in in_megatron_words(memory_hint(terms, selective))  # a model with MoE layers: SAR's


@pytest.mark.parametrize(
    "changes",
    [{"ep_overlap": True}, {"schedule": "dualpipev", "pp": 4}, {"schedule": "zb1p", "pp": 4}],
    ids=["ep-overlap", "dualpipev", "zb1p"],
)
def test_the_hint_offers_no_sharding_the_schedule_refuses(changes: dict[str, object]) -> None:
    """ZeRO-2/3 (FSDP) per-unit gathers and scatters run with whole-chunk tasks only (workloads.graph.fsdp
    check_unit_schedule): for an EP-overlap, DualPipe or ZB layout the params and grads hints must not offer them."""
    params_first = {"params": 30.0, "grads": 10.0, "optimizer": 5.0, "activations": 20.0, "buffers": 0.0}
    grads_first = {**params_first, "params": 5.0, "grads": 30.0}
    plain = LayoutSpec(name="x", zero_stage=1, main_grads_dtype="bf16")
    assert "--set zero_stage=3" in memory_hint(params_first, plain)
    assert "--set zero_stage=2" in memory_hint(grads_first, plain)
    # FP32 gradient buffers: BF16 ones first (Megatron-Bridge's recipes), in Megatron's words --grad-reduce-in-bf16
    fp32 = plain.with_(main_grads_dtype="fp32")
    assert "--grad-reduce-in-bf16" in in_megatron_words(memory_hint(grads_first, fp32.with_(**changes)))
    refused = plain.with_(**changes)
    assert "zero_stage" not in memory_hint(params_first, refused)
    assert "a larger --set pp" in memory_hint(params_first, refused)
    assert "zero_stage" not in memory_hint(grads_first, refused)
