"""How much of the corpus the fit carries, counted honestly (docs/accuracy.md).

The effective derate is the product of every GPU-wide factor that scales the measured kernel speeds without
being a measurement of those kernels: the fitted ``compute_residual`` times the ``sustained_clock_fraction``
measured on another GPU. A case's implied derate is the one at which its prediction would equal its measurement.
Each case is simulated at two derates already (the fitted calibration and residual 1), and a step's time per
token is T(d) = A + B / d (B: the work the derate scales; A: the rest), so the two runs give A and B and the
measured time gives d. If the dense cases and the MoE cases imply different derates, a mechanism is missing.
A case whose step the derate barely scales (a host-bound one: B / d small beside A) implies nothing: its d is
the ratio of two small differences, so it counts only where the derate scales at least MIN_SCALED_SHARE of its
simulated step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from experiments.validation.case_result import CaseResult
from simulator.costs.calibration import DEFAULT_CALIBRATION, UNFITTED_CALIBRATION, Calibration

# The least share of a case's simulated step that the derate scales (B / d over T) for the case to imply one: a
# measurement off by e moves the implied derate by about e / share, so a 5% error in a published number
# moves it by at most 10% here. The host-bound Qwen3-30B-A3B rows (7-22% after eager kernels paid a TE module's
# host time) would otherwise imply 1.4-5.3.
MIN_SCALED_SHARE = 0.5


def effective_derate(calibration: Calibration = DEFAULT_CALIBRATION) -> float:
    """The product of the GPU-wide factors on the kernel speeds that are not measurements of those kernels."""
    return calibration.compute_residual * calibration.sustained_clock_fraction


def implied_derate(result: CaseResult) -> float | None:
    """The effective derate at which the case's prediction equals its measurement (None: not both runs, no
    derate does (the part the derate does not scale is already slower than measured), or the derate scales under
    MIN_SCALED_SHARE of the step)."""
    fitted, unfitted = result.predicted_tokens_per_s_per_gpu, result.unfitted_tokens_per_s_per_gpu
    if not fitted or not unfitted:
        return None
    d_fitted, d_unfitted = effective_derate(DEFAULT_CALIBRATION), effective_derate(UNFITTED_CALIBRATION)
    t_fitted, t_unfitted = 1 / fitted, 1 / unfitted
    scaled = (t_fitted - t_unfitted) / (1 / d_fitted - 1 / d_unfitted)  # B
    rest = t_fitted - scaled / d_fitted  # A
    left = 1 / result.case.measured_tokens_per_s_per_gpu - rest
    if scaled <= 0 or left <= 0 or scaled / d_fitted < MIN_SCALED_SHARE * t_fitted:
        return None
    return scaled / left


def group_derate(results: Iterable[CaseResult]) -> float | None:
    """The geometric mean of the implied derates of ``results`` (None where none has one)."""
    derates = [d for d in map(implied_derate, results) if d is not None]
    return math.exp(sum(map(math.log, derates)) / len(derates)) if derates else None


def dense_and_moe(results: Iterable[CaseResult]) -> tuple[float | None, float | None]:
    """The derates the dense cases alone and the MoE cases alone imply (cases that count in the corpus MAPE)."""
    counted = [r for r in results if r.in_mape and implied_derate(r) is not None]
    dense = [r for r in counted if r.case.model.num_experts == 0]
    moe = [r for r in counted if r.case.model.num_experts > 0]
    return group_derate(dense), group_derate(moe)
