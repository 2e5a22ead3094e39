"""experiments/beyond/steady_bound.py --no-full: the shortcut timed alone takes the path the full comparison reports."""

from __future__ import annotations

import pytest

from experiments.beyond import steady_bound
from experiments.beyond.steady_bound import row, small


def _path_and_runs(line: str) -> tuple[str, str]:
    _, _, path, runs = line.split()[:4]
    return path, runs


@pytest.mark.parametrize(("name", "micro_batches"), [("1f1b", 48), ("zb1p", 64)])
def test_no_full_row_takes_the_full_rows_path(name: str, micro_batches: int) -> None:
    alone = row(small, name, micro_batches, full_run=False)
    compared = row(small, name, micro_batches)
    assert _path_and_runs(alone) == _path_and_runs(compared)
    assert "full=" not in alone and "full=" in compared


def test_no_full_flag_is_read_and_dropped(capsys: pytest.CaptureFixture[str]) -> None:
    steady_bound.main(["small", "48", "1f1b", "--no-full"])
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("1f1b m=48 exact runs=(") and "full=" not in line
