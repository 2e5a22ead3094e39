"""Plots shared by the reproductions: paper beside simulation."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt
import numpy as np

from experiments.common.paths import save_figure

# Paper series hatched, simulated series solid, one colour per system.
COLOURS = ["#9ecae1", "#3182bd", "#fdae6b", "#e6550d", "#a1d99b", "#31a354", "#bcbddc", "#756bb1"]


def label_decimals(values: list[float]) -> int:
    """Decimals of a chart's bar labels, from its largest value: 2 below 10 (1.13x), 1 below 100, else 0."""
    top = max((abs(v) for v in values if not math.isnan(v)), default=0.0)
    return 2 if top < 10 else 1 if top < 100 else 0


def bar_text(value: float, decimals: int) -> str:
    """A bar's label with ``decimals`` decimals; empty for a missing (NaN) value."""
    return "" if math.isnan(value) else f"{value:.{decimals}f}"


def bar_comparison(
    path: Path,
    *,
    title: str,
    categories: list[str],
    xlabel: str,
    ylabel: str,
    series: dict[str, object],
    paper_range: tuple[float, float] | None = None,
    paper_range_label: str = "",
) -> None:
    """Grouped bars: one group per category, one bar per series; ``paper_range`` (low, high) shades a range the
    paper states without per-bar values, and moves the legend beside the axes (the band fills their top)."""
    fig, ax = plt.subplots(figsize=(11, 4.5) if paper_range else (8, 4.5))  # room for the legend beside
    if paper_range:
        ax.axhspan(*paper_range, color="grey", alpha=0.2, label=paper_range_label or "paper range")
    drawn: list[str] = []
    decimals = label_decimals([float(v) for values in series.values() for v in values])
    width = 0.8 / len(series)
    x = np.arange(len(categories))
    for i, (label, values) in enumerate(series.items()):
        values = [float(v) for v in values]
        bars = ax.bar(
            x + (i - (len(series) - 1) / 2) * width,
            values,
            width,
            label=label,
            color=COLOURS[i % len(COLOURS)],
            hatch="//" if "paper" in label else None,
            edgecolor="white",
        )
        texts = ax.bar_label(bars, labels=[bar_text(v, decimals) for v in values], fontsize=6, padding=1)
        drawn += [t.get_text() for t in texts]
    ax.set_xticks(x, categories)
    outside = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)} if paper_range else {}
    finish(fig, ax, path, title=title, xlabel=xlabel, ylabel=ylabel, grid_axis="y", legend_at=outside)
    return drawn


def line_comparison(
    path: Path,
    *,
    title: str,
    x: list,
    xlabel: str,
    ylabel: str,
    series: dict[str, object],
    markers: dict[str, object] | None = None,
    ax=None,
) -> None:
    """Lines for simulated series; optional paper points as markers (NaN: no paper point there); the y axis
    from 0. With ``ax`` given, draws into it and leaves titling and saving to the caller."""
    fig, ax = plt.subplots(figsize=(7, 4.2)) if ax is None else (None, ax)
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
    from_zero(ax)
    if fig is not None:
        finish(fig, ax, path, title=title, xlabel=xlabel, ylabel=ylabel)


def from_zero(ax) -> None:
    """Start the y axis at 0 (a gap reads as a ratio only on a scale from 0); the top stays autoscaled."""
    ax.set_ylim(bottom=0)


def finish(
    fig,
    ax,
    path: Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    grid_axis: str = "both",
    legend_size: int = 8,
    legend_at: dict | None = None,
) -> None:
    """Label, legend (placed by ``legend_at``'s loc / bbox_to_anchor, else where it covers least data) and grid the
    axes, then write the figure to ``path`` and close it."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=legend_size, **(legend_at or {}))
    ax.grid(axis=grid_axis, alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]


def parity_plot(
    path: Path,
    *,
    title: str,
    points: list[tuple[str, float, float]],
    xlabel: str,
    ylabel: str,
    band: float = 0.1,
    open_points: list[tuple[str, float, float]] = (),
    open_label: str = "",
    ghost_points: list[tuple[str, float, float]] = (),
    ghost_label: str = "",
) -> None:
    """Predicted against measured on log-log axes: y = x, a +-``band`` region, one marker per group label;
    ``open_points`` are drawn hollow (e.g. results that do not count), labelled ``open_label``; each of
    ``ghost_points`` (another prediction of a point, e.g. without a fit) small and faint, joined by a dotted
    line to the point of ``points`` with the same group and measured value."""
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    every = [*points, *open_points, *ghost_points]
    values = [v for _, measured, predicted in every for v in (measured, predicted)]
    low, high = (min(values) / 1.5, max(values) * 1.5) if values else (1.0, 10.0)
    line = np.geomspace(low, high, 50)
    ax.plot(line, line, color="black", linewidth=0.8, label="predicted = measured")
    ax.fill_between(line, line * (1 - band), line * (1 + band), color="grey", alpha=0.2, label=f"+-{band:.0%}")
    for i, group in enumerate(dict.fromkeys(label for label, _, _ in every)):
        style = {"marker": MARKERS[i % len(MARKERS)], "s": 45, "linewidth": 0.8, "zorder": 3}
        colour = COLOURS[(2 * i + 1) % len(COLOURS)]
        for mine, hollow in (
            ([p for p in points if p[0] == group], False),
            ([p for p in open_points if p[0] == group], True),
        ):
            if mine:
                ax.scatter(
                    [m for _, m, _ in mine],
                    [p for _, _, p in mine],
                    facecolor="none" if hollow else colour,
                    edgecolor=colour if hollow else "black",
                    label=f"{group} ({open_label})" if hollow and open_label else group,
                    **style,
                )
        ghosts = [p for p in ghost_points if p[0] == group]
        if ghosts:
            ghost_style = {**style, "s": 20, "alpha": 0.6, "zorder": 2}
            ax.scatter(
                [m for _, m, _ in ghosts], [p for _, _, p in ghosts], facecolor="none", edgecolor=colour, **ghost_style
            )
            solid = {m: p for g, m, p in points if g == group}
            for _, measured, predicted in ghosts:
                if measured in solid:
                    ax.plot([measured, measured], [predicted, solid[measured]], ":", color=colour, linewidth=0.8)
    if ghost_points and ghost_label:
        ax.scatter([], [], marker="o", s=20, facecolor="none", edgecolor="grey", label=ghost_label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
