"""Bar labels of the reproduction plots keep their decimals (Table 5's 1.13x, Fig. 16's ratios)."""

from experiments.plotting import bar_comparison, bar_text


def test_bar_labels_keep_decimals(tmp_path) -> None:
    labels = bar_comparison(
        tmp_path / "bars.png",
        title="t",
        categories=["a", "b"],
        xlabel="x",
        ylabel="y",
        series={"paper": [1.0, 1.13], "sim": [1.07, 152.4]},
    )
    assert labels == ["1", "1.13", "1.07", "152"]
    assert (tmp_path / "bars.png").stat().st_size > 0


def test_bar_text() -> None:
    assert [bar_text(v) for v in (0.456, 1.13, 15.24, 99.6, 1234.5)] == ["0.456", "1.13", "15.2", "99.6", "1234"]
    assert bar_text(float("nan")) == ""
