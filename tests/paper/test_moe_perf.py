"""Megatron-LM's MoE performance test (one MoELayer on 8 H100, EP 8; NVIDIA/Megatron-LM@cf39a4dd
tests/functional_tests/test_cases/common/moe_perf/baseline.json), simulated kernel by kernel
(experiments/validation/moe_perf.py): the simulated milliseconds pinned, the error against each measured row
stated. Fitted residual (0.8458) at benchmark clocks; `python -m experiments.validation.moe_perf` prints these
and the residual-1 column.

| case | fwd meas / sim (err) | bwd meas / sim (err) |
|---|---|---|
| deepseek alltoall BF16 | 7.119 / 7.809 (+9.7%) | 10.483 / 11.936 (+13.9%) |
| deepseek flex+DeepEP BF16 | 5.682 / 5.934 (+4.4%) | 9.055 / 10.072 (+11.2%) |
| deepseek flex+HybridEP BF16 | 5.391 / 5.969 (+10.7%) | 8.795 / 10.067 (+14.5%) |
| deepseek alltoall FP8 | 7.609 / 7.821 (+2.8%) | 10.126 / 10.542 (+4.1%) |
| deepseek flex+DeepEP FP8 | 6.035 / 5.843 (-3.2%) | 8.602 / 8.677 (+0.9%) |
| deepseek flex+HybridEP FP8 | 5.143 / 5.206 (+1.2%) | 7.687 / 7.965 (+3.6%) |
| mixtral alltoall BF16 | 4.327 / 4.353 (+0.6%) | 7.684 / 7.686 (+0.0%) |
| mixtral flex+DeepEP BF16 | 4.636 / 4.243 (-8.5%) | 7.854 / 7.690 (-2.1%) |
| mixtral flex+HybridEP BF16 | 4.343 / 4.314 (-0.7%) | 7.741 / 7.686 (-0.7%) |
| mixtral alltoall FP8 | 3.788 / 3.734 (-1.4%) | 6.618 / 5.879 (-11.2%) |
| mixtral flex+DeepEP FP8 | 4.101 / 3.624 (-11.6%) | 6.827 / 5.883 (-13.8%) |
| mixtral flex+HybridEP FP8 | 3.701 / 3.589 (-3.0%) | 6.572 / 5.773 (-12.2%) |

MAPE 4.8% forward, 7.3% backward (at residual 1: 7.6%, 10.0%); the alltoall rows include the probs' own NCCL
all-to-all (workloads/dispatchers/steps.py probs_all_to_all, +12 us a layer each way in a node). Forward rows up to 9.7 us longer since cuDNN 9.19's faster attention (the layer's, untimed) leaves the host less lead at the MoE layer. The alltoall dispatcher's penalty over HybridEP is the per-copy wire
(one copy per routed expert against one per destination rank) and the sort-chunks passes: DeepSeek-like
routing 1.31x forward / 1.19x backward simulated against 1.32x / 1.19x measured, Mixtral-like 1.01x / 1.00x
against 1.00x / 0.99x; in FP8 HybridEP also skips TEGroupedMLP's padding kernels (it pads inside its dispatch):
DeepSeek-like 1.50x / 1.32x simulated against 1.48x / 1.32x. Since eager kernels pay a TE module's host time (36.5
us, stop 48) the host issuing the kernels after each token-count sync shows: the Mixtral rows' forward, short by
9-22% at a torch op's 13.48 us, is within 3.3% but for DeepEP's (8.7% and 11.8% short), and forward MAPE fell from
9.9% to 4.9%. Not reproduced: in BF16 DeepEP runs 5-7% slower than HybridEP forward and within 1% of it simulated
(both are timed at DeepEP's H800 intranode rate; HybridEP's own H100 NVLink rate is not published), and the Mixtral
FP8 backward is short by 11-14% (its expert GEMMs: 8,192 rows of a 4,096 x 9,557 SwiGLU proxy per rank).
"""

from __future__ import annotations

import pytest

from experiments.validation.moe_perf import CASES, simulated_ms

PIN_TOLERANCE = 1e-3  # relative: the simulated values are pinned, not fitted
PINNED_MS = {
    "deepseek_a2a_tp1ep8_bf16": (7.809, 11.936),
    "deepseek_deepep_tp1ep8_bf16": (6.096, 10.233),
    "deepseek_hybridep_tp1ep8_bf16": (6.130, 10.228),
    "deepseek_a2a_tp1ep8_fp8": (7.821, 10.542),
    "deepseek_deepep_tp1ep8_fp8": (6.004, 8.839),
    "deepseek_hybridep_tp1ep8_fp8": (5.367, 8.127),
    "mixtral_a2a_tp1ep8_bf16": (4.353, 7.686),
    "mixtral_deepep_tp1ep8_bf16": (4.291, 7.738),
    "mixtral_hybridep_tp1ep8_bf16": (4.362, 7.734),
    "mixtral_a2a_tp1ep8_fp8": (3.734, 5.879),
    "mixtral_deepep_tp1ep8_fp8": (3.672, 5.931),
    "mixtral_hybridep_tp1ep8_fp8": (3.637, 5.821),
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
    measured ones. In FP8 the DeepSeek penalty is wider (measured 1.48x / 1.32x, simulated 1.51x / 1.33x): HybridEP
    pads the experts' rows inside its dispatch, so its experts skip TEGroupedMLP's FP8 padding kernels, which the
    alltoall dispatcher's run (Megatron-LM moe_utils.py skip_routed_expert_padding)."""
    measured = {case.key: (case.fwd_ms, case.bwd_ms) for case in CASES}
    for proxy in ("deepseek", "mixtral"):
        a2a, hybrid = f"{proxy}_a2a_tp1ep8_bf16", f"{proxy}_hybridep_tp1ep8_bf16"
        for d in (0, 1):
            ratio = simulated[a2a][d] / simulated[hybrid][d]
            assert ratio == pytest.approx(measured[a2a][d] / measured[hybrid][d], rel=PENALTY_TOLERANCE)
    fp8 = simulated["deepseek_a2a_tp1ep8_fp8"][0] / simulated["deepseek_hybridep_tp1ep8_fp8"][0]
    assert fp8 == pytest.approx(7.609 / 5.143, rel=PENALTY_TOLERANCE)  # measured 1.480


def test_it_is_a_reproduction_target():
    from experiments.paper.reproduce import REPRODUCTIONS
    from experiments.paper.targets import TARGETS
    from experiments.validation import moe_perf

    assert REPRODUCTIONS["moe-perf"] is moe_perf.run and "moe-perf" in TARGETS
