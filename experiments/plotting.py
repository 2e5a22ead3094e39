"""Plots shared by the reproductions: paper beside simulation."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt
import numpy as np

from experiments.paths import save_figure

# Paper series hatched, simulated series solid, one colour per system.
COLOURS = ["#9ecae1", "#3182bd", "#fdae6b", "#e6550d", "#a1d99b", "#31a354", "#bcbddc", "#756bb1"]


def bar_comparison(
    path: Path, *, title: str, categories: list[str], xlabel: str, ylabel: str, series: dict[str, object]
) -> None:
    """Grouped bars: one group per category, one bar per series."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(series)
    x = np.arange(len(categories))
    for i, (label, values) in enumerate(series.items()):
        bars = ax.bar(
            x + (i - (len(series) - 1) / 2) * width,
            list(values),
            width,
            label=label,
            color=COLOURS[i % len(COLOURS)],
            hatch="//" if "paper" in label else None,
            edgecolor="white",
        )
        ax.bar_label(bars, fmt="%.0f", fontsize=6, padding=1)
    ax.set_xticks(x, categories)
    finish(fig, ax, path, title=title, xlabel=xlabel, ylabel=ylabel, grid_axis="y")


def line_comparison(
    path: Path,
    *,
    title: str,
    x: list,
    xlabel: str,
    ylabel: str,
    series: dict[str, object],
    markers: dict[str, object] | None = None,
) -> None:
    """Lines for simulated series; optional paper points as markers."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (label, values) in enumerate(series.items()):
        ax.plot(x, list(values), marker="o", label=label, color=COLOURS[(2 * i + 1) % len(COLOURS)])
    for i, (label, values) in enumerate((markers or {}).items()):
        ax.plot(
            x,
            list(values),
            linestyle="none",
            marker="x",
            markersize=9,
            label=label,
            color=COLOURS[(2 * i + 1) % len(COLOURS)],
        )
    finish(fig, ax, path, title=title, xlabel=xlabel, ylabel=ylabel)


def finish(
    fig, ax, path: Path, *, title: str, xlabel: str, ylabel: str, grid_axis: str = "both", legend_size: int = 8
) -> None:
    """Label, legend and grid the axes, then write the figure to ``path`` and close it."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=legend_size)
    ax.grid(axis=grid_axis, alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
