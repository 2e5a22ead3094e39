"""Bar labels of the reproduction plots keep their decimals (Table 5's 1.13x, Fig. 16's ratios)."""

from experiments.common.plotting import bar_comparison, bar_text, label_decimals


def test_bar_labels_keep_decimals(tmp_path) -> None:
    labels = bar_comparison(
        tmp_path / "bars.png",
        title="t",
        categories=["a", "b"],
        xlabel="x",
        ylabel="y",
        series={"paper": [1.0, 1.13], "sim": [1.204, 1.296]},
    )
    assert labels == ["1.00", "1.13", "1.20", "1.30"]
    assert (tmp_path / "bars.png").stat().st_size > 0


def test_label_decimals_follow_the_chart_scale() -> None:
    assert [label_decimals(v) for v in ([0.4, 1.13], [15.2, 3.0], [152.0, 1.0], [float("nan")])] == [2, 1, 0, 2]
    assert bar_text(1234.5, 0) == "1234" and bar_text(float("nan"), 1) == ""
