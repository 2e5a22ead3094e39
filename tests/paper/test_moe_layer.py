"""``moesim reproduce moe-layer`` (experiments/validation/moe_layer.py): one MoE layer against SonicMoE's Fig. 14 bars."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from experiments.paper.reproduce import REPRODUCTIONS
from experiments.paper.targets import TARGETS
from experiments.validation import moe_layer
from experiments.validation.moe_layer_check import POINTS
from simulator.costs.calibration import DEFAULT_CALIBRATION


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return moe_layer.simulate_frame()


def test_mape_by_hand() -> None:
    toy = pd.DataFrame({"p": [110.0, 80.0], "m": [100.0, 100.0]})
    assert moe_layer.mape(toy, "p", "m") == pytest.approx((0.10 + 0.20) / 2)


def test_every_series_of_every_point(frame: pd.DataFrame) -> None:
    """Twelve rows; the measured columns are the figure's bars as entered (30B, E 128, K 8: Megatron 223 / 215,
    DeepGEMM-pt 325 / 346, SonicMoE 503 / 512), the simulated ones the layer at both calibrations."""
    assert len(frame) == len(POINTS) == 12
    row = frame.set_index("config").loc["30B n=512 E=128 K=8"]
    assert (row.megatron_fwd_tflops, row.megatron_bwd_tflops) == (223, 215)
    assert (row.deepgemm_pt_fwd_tflops, row.deepgemm_pt_bwd_tflops) == (325, 346)
    assert (row.sonicmoe_fwd_tflops, row.sonicmoe_bwd_tflops) == (503, 512)
    for d in moe_layer.DIRECTIONS:  # faster kernels, a faster layer
        assert (frame[f"sim_residual_1_{d}_tflops"] > frame[f"sim_{d}_tflops"]).all()


def test_unfitted_forward_predicts_deepgemm_pt(frame: pd.DataFrame) -> None:
    """The accuracy the section reports, held: at published kernel speeds the simulated forward is within 10% MAPE
    of DeepGEMM-pt's (9.5% when written), and the unfitted layer below SonicMoE's on every bar."""
    s = moe_layer.summary(frame)
    assert s["fwd_unfitted_vs_deepgemm_pt_mape"] < 0.10
    assert s["fwd_sonicmoe_over_unfitted_min"] > 1 and s["bwd_sonicmoe_over_unfitted_min"] > 1
    assert s["fwd_megatron_share_min"] <= s["fwd_megatron_share_median"] <= s["fwd_megatron_share_max"] < 1
    assert s["both_megatron_share_min"] <= s["both_megatron_share_mean"] <= s["both_megatron_share_max"] < 1.05


def test_fitted_backward_meets_megatrons_bars(frame: pd.DataFrame) -> None:
    """Issue 40's SonicMoE target, backward: with the unfused permutation's backward as Megatron-Core runs it
    (index_add_ at its measured element rate) the fitted layer is within 15% of Megatron's backward bar on 11 of 12
    configurations (7.6% MAPE when written; the 1.4B E=128 K=8 bar, -16.3%, is the one beyond), where at HBM bandwidth
    it was 1.07-1.75x faster on every bar. The forward is not: faster on every bar, 7-26%."""
    s = moe_layer.summary(frame)
    assert s["bwd_fitted_vs_megatron_mape"] < 0.10
    errors = frame.sim_bwd_tflops / frame.megatron_bwd_tflops - 1
    assert (errors.abs() <= 0.15).sum() >= 11 and errors.abs().max() < 0.20
    assert s["fwd_fitted_over_megatron_min"] > 1 and s["fwd_fitted_vs_megatron_mape"] > 0.10


def test_forward_and_backward_together_by_hand() -> None:
    """Megatron at 100 / 100 TFLOP/s, the simulated layer at 200 / 100: time ~ 1/fwd + 2/bwd, so the share is
    (1/200 + 2/100) / (1/100 + 2/100) = 0.025 / 0.03 = 5/6."""
    toy = {f"{series}_{d}_tflops": [100.0] for series in moe_layer.MEASURED for d in moe_layer.DIRECTIONS}
    toy |= {"sim_residual_1_fwd_tflops": [200.0], "sim_residual_1_bwd_tflops": [100.0]}
    toy |= {"sim_fwd_tflops": [150.0], "sim_bwd_tflops": [90.0]}
    s = moe_layer.summary(pd.DataFrame(toy))
    assert s["both_megatron_share_median"] == pytest.approx(5 / 6)
    assert s["fwd_megatron_share_median"] == pytest.approx(0.5) and s["bwd_megatron_share_median"] == 1.0


def test_reproduction_writes_csv_plot_and_section(tmp_path: Path) -> None:
    assert REPRODUCTIONS["moe-layer"] is moe_layer.run and "moe-layer" in TARGETS
    section = moe_layer.run(tmp_path)
    assert section.startswith("## Beyond the paper: one MoE layer")
    assert section.count("\n| ") == 12 + 1  # header + one row per configuration
    assert "backward (MAPE" in section and f"{DEFAULT_CALIBRATION.compute_residual:.4f}" in section
    written = pd.read_csv(tmp_path / "moe-layer.csv")
    assert list(written.config) == [moe_layer.config_label(p) for p in POINTS]
    assert (tmp_path / "moe-layer.png").stat().st_size > 10_000
