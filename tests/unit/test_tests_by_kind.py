"""The tests' layout (issue 38): every test file sits in the folder of its kind, each folder says what belongs in it."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
KINDS = ("unit", "scenarios", "differential", "properties", "paper")


def test_every_test_file_is_in_a_kind_folder() -> None:
    misplaced = [
        p.relative_to(TESTS).as_posix()
        for p in TESTS.rglob("test_*.py")
        if p.parent.name not in KINDS or p.parent.parent != TESTS
    ]
    assert not misplaced, f"move these into tests/<kind>/ ({', '.join(KINDS)}): {misplaced}"


def test_each_kind_folder_is_a_package_that_says_what_belongs_there() -> None:
    for kind in KINDS:
        init = TESTS / kind / "__init__.py"
        assert init.is_file(), f"{init} is missing: tests.{kind}.test_* modules would clash by name"
        assert "What belongs here" in (ast.get_docstring(ast.parse(init.read_text())) or ""), init
