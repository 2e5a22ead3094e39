"""Progress bars: drawn with an ETA on a terminal, silent on a pipe or with --quiet; per-point results go to
the table, not the screen."""

from __future__ import annotations

import io
import sys

from experiments.common.progress import bar
from experiments.search.sweep import load_sweep, run_sweep

SWEEP = (
    "model: mixtral-8x7b\ngpus: 16\nglobal_batch: 8\nseq_len: 2048\nintra_size: 4\npp: [2, 4]\netp: 2\noutput: o.csv\n"
)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def on_terminal(monkeypatch) -> Terminal:
    """Make stderr a terminal, inside the test body (pytest's capture resets sys.stderr after fixtures)."""
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    return screen


def _points(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    return load_sweep(path)


def test_sweep_draws_a_bar_on_a_terminal(tmp_path, monkeypatch) -> None:
    points, output = _points(tmp_path)
    terminal = on_terminal(monkeypatch)
    run_sweep(points, output)
    screen = terminal.getvalue()
    assert "sweep: 100%" in screen and "2/2" in screen and "<" in screen  # elapsed<remaining: the ETA
    assert "[1/2]" not in screen and "step" not in screen  # no per-point lines: they are rows of o.csv
    assert len(output.read_text().splitlines()) == 3


def test_quiet_draws_nothing(tmp_path, monkeypatch) -> None:
    points, output = _points(tmp_path)
    terminal = on_terminal(monkeypatch)
    run_sweep(points, output, quiet=True)
    assert terminal.getvalue() == ""
    assert bar(3, "x", quiet=True).disable


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with bar(3, "x") as progress:
        progress.update(3)
    assert progress.disable and sys.stderr.getvalue() == ""
