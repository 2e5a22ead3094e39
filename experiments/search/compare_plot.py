"""The plot of ``moesim compare``: tokens/s per GPU against the swept variable, one panel per value of a
second swept variable, y from 0; an errored point has no value, so it is marked by a red x on the panel's top
edge above its x (never drawn as a value, e.g. at 0)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from experiments.common.paths import save_figure

Series = dict[str, list[tuple[object, float]]]  # label -> (x value, tokens/s per GPU; NaN: errored)


def _name(layout: object) -> str:
    """A layout's legend label: a preset's name, a file's stem."""
    text = str(layout)
    return Path(text).stem if text.endswith((".yaml", ".yml")) else text


def _varied(frame: pd.DataFrame, columns: list[str]) -> list[str]:
    """The columns among ``columns`` that take more than one value in ``frame``."""
    return [c for c in columns if frame[c].nunique(dropna=False) > 1]


def layout_of_plot(frame: pd.DataFrame, axis_columns: list[str]) -> tuple[str, str | None, list[str]]:
    """(x column, facet column or None, series columns): x is the first swept variable that varies (GPUs if
    none does), the facet the second, and the rest (layout, GPUs, further axes) name the lines."""
    swept = _varied(frame, axis_columns)
    x = swept[0] if swept else "gpus"
    facet = swept[1] if len(swept) > 1 else None
    rest = [c for c in ["layout", *axis_columns, "gpus"] if c not in (x, facet)]
    series = _varied(frame, rest) or ["layout"]
    return x, facet, series


def panels(frame: pd.DataFrame, axis_columns: list[str]) -> tuple[str, str | None, dict[str, Series]]:
    """The data drawn: x column, facet column, and per facet title the points of each line."""
    x, facet, series = layout_of_plot(frame, axis_columns)
    out: dict[str, Series] = {}
    groups = frame.groupby(facet, sort=False) if facet else [(None, frame)]
    for value, part in groups:
        title = f"{facet}={value}" if facet else ""
        lines: Series = {}
        for key, group in part.groupby(series, sort=False):
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(_name(v) if c == "layout" else f"{c}={v}" for c, v in zip(series, key))
            lines[label] = [(xv, tps / g) for xv, tps, g in zip(group[x], group.tokens_per_s, group.gpus)]
        out[title] = lines
    return x, facet, out


def plot(frame: pd.DataFrame, axis_columns: list[str], path: Path, title: str) -> dict[str, Series]:
    """Draw and write the plot; returns what it drew (see ``panels``)."""
    import matplotlib.pyplot as plt

    fig, data = draw(frame, axis_columns, title)
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return data


def draw(frame: pd.DataFrame, axis_columns: list[str], title: str):
    """The figure of ``plot`` and what it drew, not yet written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, _, data = panels(frame, axis_columns)
    ticks = list(dict.fromkeys(frame[x]))  # every x value, in the order given; strings work too
    fig, axes = plt.subplots(1, len(data), figsize=(4.5 * len(data) + 2, 4.5), sharey=True, squeeze=False)
    errored = False
    for ax, (panel, lines) in zip(axes[0], data.items()):
        marked = False
        for label, points in lines.items():
            xs = [ticks.index(v) for v, _ in points]
            ys = [y for _, y in points]
            if not all(math.isnan(y) for y in ys):
                ax.plot(xs, ys, marker="o", label=label)  # NaN breaks the line: no value drawn there
            bad = [i for i, y in zip(xs, ys) if math.isnan(y)]
            if bad:  # x in data, y in axes fraction: on the top edge whatever the scale, so it reads as no value
                edge = ax.get_xaxis_transform()
                style = {"linestyle": "none", "marker": "x", "color": "red", "markersize": 9, "transform": edge}
                ax.plot(bad, [0.97] * len(bad), label="" if marked else "failed (no value)", **style)
                errored = marked = True
        ax.set_xticks(range(len(ticks)), [f"{t:g}" if isinstance(t, float) else str(t) for t in ticks])
        ax.set_xlabel(x)
        ax.set_title(panel, fontsize=9)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="lower right")
    values = [y for lines in data.values() for pts in lines.values() for _, y in pts if not math.isnan(y)]
    # from 0, shared by every panel; headroom keeps the values below the failed points' marks on the top edge
    axes[0][0].set_ylim(0, max(values) * 1.15 if values else 1.0)
    if not values:
        axes[0][0].set_yticks([])  # no scale to read
        for ax in axes[0]:
            ax.text(0.5, 0.5, "every point failed:\nsee the CSV's error column", ha="center", transform=ax.transAxes)
    axes[0][0].set_ylabel("tokens/s per GPU")
    note = "\nred x on the top edge: the point failed (no value), see the CSV's error column" if errored else ""
    fig.suptitle(title + note, fontsize=10)
    fig.tight_layout()
    return fig, data
