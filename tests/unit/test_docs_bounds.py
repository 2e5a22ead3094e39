"""The folded-against-unfolded bounds: docs/design.md's table says what tests/differential/bounds.py holds."""

from __future__ import annotations

import re
from pathlib import Path

from tests.differential.bounds import BOUNDS

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"


def test_the_design_page_lists_every_bound_the_tests_hold() -> None:
    rows = {}
    for line in DESIGN.read_text().splitlines():
        if match := re.match(r"^\| ([^|]+?) \| ([0-9.]+)% \|", line):
            rows[match.group(1)] = float(match.group(2)) / 100
    assert rows.keys() == BOUNDS.keys()
    for name, bound in BOUNDS.items():
        assert abs(rows[name] - bound) < 1e-12, name
