"""save_figure after tight_layout: one draw instead of two, the same PNG as matplotlib's own savefig."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from experiments.common.paths import save_figure


def _figure():
    """A laid-out figure with a legend at 'best' (placed at each draw) and bar labels, counting its draws."""
    fig, ax = plt.subplots(figsize=(4, 3))
    bars = ax.bar([0, 1, 2], [3.0, 1.0, 2.0], label="simulated", hatch="//")
    ax.bar_label(bars, fontsize=6)
    ax.set_title("title")
    ax.legend()
    fig.tight_layout()
    draws = []
    fig.canvas.mpl_connect("draw_event", lambda event: draws.append(event))
    return fig, draws


def test_one_draw_and_the_same_file(tmp_path: Path) -> None:
    plain, plain_draws = _figure()
    plain.savefig(tmp_path / "plain.png", dpi=120)  # tight_layout's placeholder engine: a layout draw first
    ours, our_draws = _figure()
    save_figure(ours, tmp_path / "ours.png", dpi=120)
    plt.close("all")
    assert (len(plain_draws), len(our_draws)) == (2, 1)
    assert (tmp_path / "ours.png").read_bytes() == (tmp_path / "plain.png").read_bytes()
