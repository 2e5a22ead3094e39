"""Megatron-LM's MoE performance test (one MoELayer on 8 H100, EP 8; NVIDIA/Megatron-LM@cf39a4dd
tests/functional_tests/test_cases/common/moe_perf/baseline.json), simulated kernel by kernel
(experiments/validation/moe_perf.py): the simulated milliseconds pinned, the error against each measured row
stated. Fitted residual (0.8468) at benchmark clocks; `python -m experiments.validation.moe_perf` prints these
and the residual-1 column.

| case | fwd meas / sim (err) | bwd meas / sim (err) |
|---|---|---|
| deepseek alltoall BF16 | 7.119 / 7.654 (+7.5%) | 10.483 / 11.562 (+10.3%) |
| deepseek flex+DeepEP BF16 | 5.682 / 5.820 (+2.4%) | 9.055 / 9.709 (+7.2%) |
| deepseek flex+HybridEP BF16 | 5.391 / 5.826 (+8.1%) | 8.795 / 9.705 (+10.3%) |
| deepseek alltoall FP8 | 7.609 / 7.487 (-1.6%) | 10.126 / 10.254 (+1.3%) |
| deepseek flex+DeepEP FP8 | 6.035 / 5.654 (-6.3%) | 8.602 / 8.402 (-2.3%) |
| deepseek flex+HybridEP FP8 | 5.143 / 5.659 (+10.0%) | 7.687 / 8.397 (+9.2%) |
| mixtral alltoall BF16 | 4.327 / 3.901 (-9.9%) | 7.684 / 7.628 (-0.7%) |
| mixtral flex+DeepEP BF16 | 4.636 / 3.936 (-15.1%) | 7.854 / 7.644 (-2.7%) |
| mixtral flex+HybridEP BF16 | 4.343 / 3.939 (-9.3%) | 7.741 / 7.639 (-1.3%) |
| mixtral alltoall FP8 | 3.788 / 3.185 (-15.9%) | 6.618 / 5.824 (-12.0%) |
| mixtral flex+DeepEP FP8 | 4.101 / 3.220 (-21.5%) | 6.827 / 5.840 (-14.5%) |
| mixtral flex+HybridEP FP8 | 3.701 / 3.224 (-12.9%) | 6.572 / 5.835 (-11.2%) |

MAPE 10.0% forward, 6.9% backward (at residual 1: 14.0%, 10.2%). The alltoall dispatcher's penalty over HybridEP is the per-copy wire
(one copy per routed expert against one per destination rank) and the sort-chunks passes: DeepSeek-like
routing 1.31x forward / 1.19x backward simulated against 1.32x / 1.19x measured, Mixtral-like 0.99x / 1.00x
against 1.00x / 0.99x. Not reproduced: DeepEP runs 5-11% slower than HybridEP forward in every measured row
and within 1% of it simulated (both are timed at DeepEP's H800 intranode rate; HybridEP's own H100 NVLink rate
is not published), and the Mixtral rows are short by 9-22% forward (their expert GEMMs: 8,192 rows of a
4,096 x 9,557 SwiGLU proxy per rank).
"""

from __future__ import annotations

import pytest

from experiments.validation.moe_perf import CASES, simulated_ms

PIN_TOLERANCE = 1e-3  # relative: the simulated values are pinned, not fitted
PINNED_MS = {
    "deepseek_a2a_tp1ep8_bf16": (7.654, 11.562),
    "deepseek_deepep_tp1ep8_bf16": (5.820, 9.709),
    "deepseek_hybridep_tp1ep8_bf16": (5.826, 9.705),
    "deepseek_a2a_tp1ep8_fp8": (7.487, 10.254),
    "deepseek_deepep_tp1ep8_fp8": (5.654, 8.402),
    "deepseek_hybridep_tp1ep8_fp8": (5.659, 8.397),
    "mixtral_a2a_tp1ep8_bf16": (3.901, 7.628),
    "mixtral_deepep_tp1ep8_bf16": (3.936, 7.644),
    "mixtral_hybridep_tp1ep8_bf16": (3.939, 7.639),
    "mixtral_a2a_tp1ep8_fp8": (3.185, 5.824),
    "mixtral_deepep_tp1ep8_fp8": (3.220, 5.840),
    "mixtral_hybridep_tp1ep8_fp8": (3.224, 5.835),
}
PENALTY_TOLERANCE = 0.05  # relative, the alltoall / HybridEP time ratio against the measured one


@pytest.fixture(scope="module")
def simulated() -> dict[str, tuple[float, float]]:
    return {case.key: simulated_ms(case) for case in CASES}


def test_every_baseline_row_is_simulated_and_pinned(simulated):
    assert set(PINNED_MS) == {case.key for case in CASES}
    for key, (fwd, bwd) in PINNED_MS.items():
        assert simulated[key][0] == pytest.approx(fwd, rel=PIN_TOLERANCE), key
        assert simulated[key][1] == pytest.approx(bwd, rel=PIN_TOLERANCE), key


def test_the_alltoall_penalty_follows_the_routing(simulated):
    """DeepSeek-like routing (top-8 within 4 of 8 ranks) pays the alltoall dispatcher's per-copy wire; Mixtral-like
    (top-2, one expert per rank) does not: in BF16 the simulated alltoall / HybridEP ratios are within 5% of the
    measured ones. In FP8 the measured DeepSeek penalty is wider (1.48x / 1.32x) than simulated (1.32x / 1.22x,
    -11% / -7%); the anchors' source does not say why (the gap's cause was not measured apart)."""
    measured = {case.key: (case.fwd_ms, case.bwd_ms) for case in CASES}
    for proxy in ("deepseek", "mixtral"):
        a2a, hybrid = f"{proxy}_a2a_tp1ep8_bf16", f"{proxy}_hybridep_tp1ep8_bf16"
        for d in (0, 1):
            ratio = simulated[a2a][d] / simulated[hybrid][d]
            assert ratio == pytest.approx(measured[a2a][d] / measured[hybrid][d], rel=PENALTY_TOLERANCE)
    fp8 = simulated["deepseek_a2a_tp1ep8_fp8"][0] / simulated["deepseek_hybridep_tp1ep8_fp8"][0]
    assert fp8 == pytest.approx(1.323, rel=1e-2)  # measured 7.609 / 5.143 = 1.480


def test_it_is_a_reproduction_target():
    from experiments.paper.reproduce import REPRODUCTIONS
    from experiments.paper.targets import TARGETS
    from experiments.validation import moe_perf

    assert REPRODUCTIONS["moe-perf"] is moe_perf.run and "moe-perf" in TARGETS
