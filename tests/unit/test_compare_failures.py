"""``moesim compare`` when points fail: the plot marks them without a value, the command exits 2 when every point
failed, and a failed point's hint (``--set pp=6``) is a flag compare takes, as is ``--seq-len``."""

from __future__ import annotations

import math
import re

import pandas as pd

from experiments.cli.main import main
from experiments.search.compare_plot import draw

# 240 GPUs = 8 x 15 (PP) x 2 (DP); 30 sequences -> 15 micro-batches per pipeline: fast (tests/unit/test_compare.py).
FAST = ["--gpus", "240", "--global-batch", "30"]


def compare(tmp_path, flags: list[str]) -> int:
    return main(["compare", *FAST, *flags, "--out", str(tmp_path / "c.csv")])


def test_every_point_failed_exits_2_with_one_line_and_writes_the_csv(tmp_path, capsys) -> None:
    assert compare(tmp_path, ["--sweep", "pp=7,9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("moesim: error: compare: every point failed (2 of 2)") and "\n" not in err
    frame = pd.read_csv(tmp_path / "c.csv")
    assert frame.tokens_per_s.isna().all() and (tmp_path / "c.png").stat().st_size > 0


def test_some_points_failed_exits_0(tmp_path) -> None:
    assert compare(tmp_path, ["--sweep", "pp=15,7"]) == 0


def test_the_hint_of_a_failed_point_runs_as_compare_flags(tmp_path, capsys) -> None:
    """pp = 7 does not divide 240 GPUs; the error's ``--set pp=N`` hint, given back to compare, runs."""
    assert compare(tmp_path, ["--set", "pp=7"]) == 2
    hint = re.search(r"--set pp=(\d+)", capsys.readouterr().err)
    assert hint, "the failed point's hint"
    assert compare(tmp_path, ["--set", f"pp={hint.group(1)}"]) == 0
    (row,) = pd.read_csv(tmp_path / "c.csv").itertuples()
    assert row.pp == int(hint.group(1)) and row.tokens_per_s > 0


def test_seq_len_reaches_the_simulation(tmp_path) -> None:
    assert compare(tmp_path, ["--seq-len", "4096"]) == 0
    (row,) = pd.read_csv(tmp_path / "c.csv").itertuples()
    assert row.seq_len == 4096
    assert math.isclose(row.tokens_per_s * row.step_time_s, 30 * 4096, rel_tol=1e-4)  # the CSV keeps 6 digits


def test_set_and_sweep_of_one_key_is_a_one_line_error(tmp_path, capsys) -> None:
    assert compare(tmp_path, ["--sweep", "pp=15,12", "--set", "pp=15"]) == 2
    assert "--set pp: pp is swept too" in capsys.readouterr().err


def _frame(tokens_per_s: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {"layout": "megascale-moe", "pp": [15, 12, 7], "gpus": 240, "tokens_per_s": tokens_per_s, "error": ""}
    )


def test_failed_points_are_marked_on_the_top_edge_not_drawn_as_values() -> None:
    import matplotlib.pyplot as plt

    fig, _ = draw(_frame([240e3, 230e3, math.nan]), ["pp"], "t")
    (ax,) = fig.axes
    assert ax.get_ylim()[0] == 0
    values = [line for line in ax.get_lines() if line.get_transform() == ax.transData]
    (drawn,) = values
    assert list(drawn.get_xdata()) == [0, 1, 2] and math.isnan(drawn.get_ydata()[2])  # a gap, not 0
    (marks,) = [line for line in ax.get_lines() if line not in values]
    assert list(marks.get_xdata()) == [2] and marks.get_label() == "failed (no value)"
    assert marks.get_transform() == ax.get_xaxis_transform() and marks.get_ydata()[0] > 0.9  # top edge
    assert max(drawn.get_ydata()[:2]) / 240 < 0.9 * ax.get_ylim()[1]  # values sit below the marks
    plt.close(fig)


def test_every_point_failed_plot_has_no_scale() -> None:
    import matplotlib.pyplot as plt

    fig, _ = draw(_frame([math.nan] * 3), ["pp"], "t")
    (ax,) = fig.axes
    assert list(ax.get_yticks()) == [] and "every point failed" in ax.texts[0].get_text()
    assert all(line.get_transform() != ax.transData for line in ax.get_lines())  # nothing drawn as a value
    plt.close(fig)
