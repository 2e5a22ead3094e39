"""Beyond-the-paper reproductions: R against hidden EP time (experiments.beyond.r_ratio) and the scale-up
domain sweep (experiments.beyond.scaleup_domain)."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.beyond import r_ratio, scaleup_domain
from experiments.paper.reproduce import REPRODUCTIONS


def test_r_ratio_by_hand() -> None:
    """M1 over NVLink: 3/2 x 14,336 x 160e9 / 989e12 x 8/7 = 3.9759; over a 47 GB/s NIC: 1.1679."""
    assert r_ratio.r_ratio(14336, 160e9, 989e12, 8) == pytest.approx(3.97590, rel=1e-5)
    assert r_ratio.r_ratio(14336, 47e9, 989e12, 8) == pytest.approx(1.16792, rel=1e-5)


def test_crossing_interpolates() -> None:
    frame = pd.DataFrame({"R": [0.2, 0.4, 1.0], "hidden": [0.1, 0.3, 0.7]})
    assert r_ratio.crossing(frame) == pytest.approx(0.4 + 0.2 / 0.4 * 0.6)
    assert r_ratio.crossing(frame, level=0.9) != r_ratio.crossing(frame, level=0.9)  # NaN: never reached


def test_slower_link_hides_less_of_ep() -> None:
    """M1 with EP over a 10 GB/s link hides a smaller fraction than over NVLink, and its EP takes longer."""
    slow = r_ratio.ep_hidden("paper-352b", 10e9, 5e-6)
    fast = r_ratio.ep_hidden("paper-352b", 160e9, 3e-6)
    assert slow["hidden"] < 0.5 < fast["hidden"] <= 1.0
    assert slow["ep_comm_s"] > fast["ep_comm_s"] and slow["ep_exposed_s"] > fast["ep_exposed_s"]


def test_intra_size_per_domain() -> None:
    """n divides the domain, M1's 32 heads and 32 experts: 8 -> 8, 16 -> 16, 32 -> 32, 72 -> 8."""
    assert [scaleup_domain.intra_size(d) for d in (8, 16, 32, 72)] == [8, 16, 32, 8]


def test_registered_and_r_ratio_run_writes_files(tmp_path) -> None:
    assert REPRODUCTIONS["scaleup-domain"] is scaleup_domain.run and REPRODUCTIONS["r-ratio"] is r_ratio.run
    section = r_ratio.run(tmp_path)
    assert (tmp_path / "r-ratio.csv").exists() and (tmp_path / "r-ratio.png").exists()
    assert "crosses 50% at R ~" in section
    frame = pd.read_csv(tmp_path / "r-ratio.csv")
    assert len(frame) == 12 + len(r_ratio.SWEEP_GBPS)
