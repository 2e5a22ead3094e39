"""experiments/validation/derates.py: the derate a case implies, from its two runs, worked out by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from experiments.validation.case_result import CaseResult
from experiments.validation.corpus import Case
from experiments.validation.derates import MIN_SCALED_SHARE, dense_and_moe, effective_derate, implied_derate
from simulator.costs.calibration import DEFAULT_CALIBRATION, UNFITTED_CALIBRATION

REST_S, SCALED_S = 2e-4, 5e-4  # seconds per token per GPU: A, and B at derate 1 (T(d) = A + B / d)


def _case(measured_at_derate: float, dense: bool = False, rest_s: float = REST_S) -> CaseResult:
    def throughput(derate: float) -> float:
        return 1 / (rest_s + SCALED_S / derate)

    case = Case(
        name="x",
        model=SimpleNamespace(num_experts=0 if dense else 8),  # only what tells dense from MoE
        cluster="h800",
        gpus=8,
        global_batch=8,
        seq_len=1024,
        layout=None,
        megatron_args="",
        measured_tokens_per_s_per_gpu=throughput(measured_at_derate),
        measured_model_tflops_per_gpu=None,
        source={"document": "d"},
    )
    fitted, unfitted = effective_derate(DEFAULT_CALIBRATION), effective_derate(UNFITTED_CALIBRATION)
    return CaseResult(case, throughput(fitted), unfitted_tokens_per_s_per_gpu=throughput(unfitted))


def test_effective_derate_is_the_product_of_the_gpu_wide_factors() -> None:
    assert effective_derate() == pytest.approx(DEFAULT_CALIBRATION.compute_residual * 0.849)
    assert effective_derate(UNFITTED_CALIBRATION) == pytest.approx(0.849)


@pytest.mark.parametrize("derate", [0.5, 0.72, 0.9, 1.2])
def test_a_case_implies_the_derate_its_measurement_was_made_at(derate: float) -> None:
    assert implied_derate(_case(derate)) == pytest.approx(derate, rel=1e-9)


def test_no_derate_where_the_unscaled_part_alone_is_slower_than_measured() -> None:
    result = _case(0.8)
    fast = CaseResult(
        result.case.__class__(**{**result.case.__dict__, "measured_tokens_per_s_per_gpu": 1 / REST_S * 1.01}),
        result.predicted_tokens_per_s_per_gpu,
        unfitted_tokens_per_s_per_gpu=result.unfitted_tokens_per_s_per_gpu,
    )
    assert implied_derate(fast) is None


def test_no_derate_where_the_derate_scales_too_little_of_the_step() -> None:
    """A host-bound step: at the fitted derate B / d is 6.97e-4 s, so with A at 7e-4 the derate scales 49.9% of it
    (below MIN_SCALED_SHARE) and the case implies nothing; with A at 6.9e-4, 50.3%, it implies its own derate."""
    scaled_s = SCALED_S / effective_derate(DEFAULT_CALIBRATION)
    assert scaled_s / (scaled_s + 7e-4) < MIN_SCALED_SHARE < scaled_s / (scaled_s + 6.9e-4)
    assert implied_derate(_case(0.6, rest_s=7e-4)) is None
    assert implied_derate(_case(0.6, rest_s=6.9e-4)) == pytest.approx(0.6, rel=1e-9)


def test_dense_and_moe_derates_are_geometric_means_of_their_cases() -> None:
    dense = [_case(0.9, dense=True), _case(0.4, dense=True)]
    moe = [_case(0.7)]
    got_dense, got_moe = dense_and_moe(dense + moe)
    assert got_dense == pytest.approx(0.6) and got_moe == pytest.approx(0.7)
