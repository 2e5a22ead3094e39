"""The reproduction plots show what their axes say (issue 41): y axes from 0, schedules' bars as long as the step
time, no colliding labels, the paper's points where a figure reproduces one. Each plot is drawn from a small frame
and inspected before it is written (its module's save_figure replaced)."""

from __future__ import annotations

import math
from itertools import combinations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from experiments.beyond import layouts_ep, r_ratio, schedules
from experiments.common import plotting
from experiments.paper import weak_scaling


@pytest.fixture
def figures(monkeypatch) -> list:
    """The figures the plot functions would write, in order (closed at the end)."""
    caught: list = []
    close = plt.close
    for module in (plotting, schedules, weak_scaling, layouts_ep, r_ratio):
        monkeypatch.setattr(module, "save_figure", lambda fig, path, **_: caught.append(fig))
    monkeypatch.setattr(plt, "close", lambda fig=None: None)  # keep them for inspection
    yield caught
    for fig in caught:
        close(fig)


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _no_text_overlaps(fig, texts) -> None:
    fig.canvas.draw()
    boxes = [(t.get_text(), t.get_window_extent()) for t in texts if t.get_text() and t.get_visible()]
    assert [(a, b) for (a, x), (b, y) in combinations(boxes, 2) if _overlap(x, y)] == []


def test_line_comparison_starts_y_at_0(figures, tmp_path) -> None:
    plotting.line_comparison(
        tmp_path / "l.png", title="t", x=[8, 16], xlabel="x", ylabel="y", series={"s": [1350, 1400]}
    )
    assert figures[0].axes[0].get_ylim()[0] == 0


def test_schedules_bars_are_the_step_time_and_labels_do_not_overlap(figures, tmp_path) -> None:
    names = list(schedules.SCHEDULES)
    step = [8.0 - 0.2 * i for i in range(len(names))]
    frame = pd.DataFrame({"schedule": names, "step_time_s": step, "bubble_s": [2.0] * len(names)})
    frame["exposed_ep_s"] = 1.5
    schedules.plot(frame, tmp_path / "s.png")
    (fig,) = figures
    ax = fig.axes[0]
    ends = {}
    for patch in ax.patches:  # horizontal bars: each part starts where the one before ends
        y = round(patch.get_y() + patch.get_height() / 2)
        ends[y] = max(ends.get(y, 0.0), patch.get_x() + patch.get_width())
    assert [ends[y] for y in sorted(ends)] == pytest.approx(step[::-1])  # the first schedule on top
    assert ax.get_xlabel() == "seconds per step" and ax.get_xlim()[0] == 0
    _no_text_overlaps(fig, ax.get_yticklabels())


def test_weak_scaling_shows_the_paper_points_from_0(figures, tmp_path) -> None:
    gpus, batch = zip(*weak_scaling.POINTS)
    frame = pd.DataFrame({"gpus": gpus, "global_batch": batch})
    frame["megatron-lm_tokens_per_s_per_gpu"] = 590.0
    frame["megascale-moe_tokens_per_s_per_gpu"] = 1010.0
    frame["speedup"] = 1010 / 590
    weak_scaling.plot(frame, tmp_path / "w.png")
    left, right = figures[0].axes
    assert left.get_ylim()[0] == 0 and right.get_ylim()[0] == 0
    paper = {line.get_label(): line for line in left.get_lines() if "paper" in line.get_label()}
    assert len(paper) == 2
    megascale = paper["MegaScale-MoE paper (Table 3)"].get_ydata()
    shown = [(g, y) for g, y in zip(gpus, megascale) if not math.isnan(y)]
    assert shown == [(960, pytest.approx(963.8e3 / 960))]  # Table 3's 960-GPU row, batch 720: Fig. 12's point
    band = right.patches[0].get_extents()  # the paper's stated speedup range, shaded
    assert band.height > 0


def test_layouts_ep_y_axes_from_0(figures, tmp_path) -> None:
    rows = [
        {
            "model_label": m,
            "model": m,
            "gpus": 480,
            "layout": lay,
            "placement": p,
            "nic_gbps": g,
            "tokens_per_s_per_gpu": v,
        }
        for m in ("M1", "M6")
        for lay, p, v in (("in-node", "in-node", 1100.0), ("cross-node", "cross-node", 1600.0))
        for g in (50, 100)
    ]
    layouts_ep.plot(pd.DataFrame(rows), tmp_path / "e.png")
    assert [ax.get_ylim()[0] for ax in figures[0].axes] == [0, 0]


def test_r_ratio_names_models_in_the_legend_not_beside_points(figures, tmp_path) -> None:
    """Six names beside points a few percent apart collided; the legend names each model once instead."""
    models = ["a", "b", "c"]
    rows = [
        {"model": m, "link": link, "link_GBps": 160.0 if link == "nvlink" else 47.0, "R": 3 + 0.1 * i, "hidden": 0.82}
        for link in r_ratio.LINKS
        for i, m in enumerate(models)
    ]
    rows += [{"model": "paper-352b", "link": "sweep", "link_GBps": g, "R": g / 40, "hidden": 0.8} for g in (5, 160)]
    r_ratio.plot(pd.DataFrame(rows), tmp_path / "r.png")
    (fig,) = figures
    ax = fig.axes[0]
    assert len(ax.texts) == 0
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert all(m in labels for m in models)
    _no_text_overlaps(fig, ax.get_legend().get_texts())


def test_a_range_the_paper_states_is_shaded_behind_the_bars(figures, tmp_path) -> None:
    """Fig. 16's paper gives only a range (1.2-4.7x); the bars are drawn against it, from 0."""
    series = {"pair a": [1.69, 1.44], "pair b": [1.07, 1.56]}
    plotting.bar_comparison(
        tmp_path / "b.png",
        title="t",
        categories=["m1", "m6"],
        xlabel="x",
        ylabel="y",
        series=series,
        paper_range=(1.2, 4.7),
    )
    ax = figures[0].axes[0]
    (band,) = [p for p in ax.patches if p.get_label().startswith("paper")]
    corners = band.get_path().transformed(band.get_patch_transform()).vertices[:, 1]
    assert (corners.min(), corners.max()) == pytest.approx((1.2, 4.7)) and ax.get_ylim()[0] == 0
    _no_text_overlaps(figures[0], [*ax.get_xticklabels(), *ax.get_legend().get_texts()])
