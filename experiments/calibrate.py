"""The one fit to the paper: GEMM tile efficiency on Table 3's MegaScale-MoE 240-GPU row (DESIGN.md)."""

from __future__ import annotations

from simulator.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.report import simulate

FIT_TARGET_STEP_S = 21.61  # MegaScale-MoE, 240 GPUs, Table 3


def fit_gemm_efficiency(base: Calibration = DEFAULT_CALIBRATION, tolerance: float = 1e-4) -> float:
    """Bisect gemm_mma_efficiency until the simulated 240-GPU MegaScale-MoE step takes 21.61 s."""
    low, high = 0.05, 1.0  # step time falls as efficiency rises
    while high - low > tolerance:
        middle = (low + high) / 2
        step = simulate("paper-352b", "megascale-moe", 240, calibration=base.with_(gemm_mma_efficiency=middle))
        if step.step_time_s > FIT_TARGET_STEP_S:
            low = middle
        else:
            high = middle
    return (low + high) / 2
