"""The Python examples of the documentation run as written (docs/api.md, docs/getting-started.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _snippets(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.DOTALL)


def test_api_page_snippet() -> None:
    """`import moesim` works and the API page's first snippet runs as written."""
    snippet = _snippets("api.md")[0]
    assert "import moesim" in snippet
    scope: dict = {}
    exec(compile(snippet, "docs/api.md", "exec"), scope)  # noqa: S102 - the snippet is our own documentation
    report = scope["report"]
    assert report.step_time_s > 0 and 0 < report.mfu < 1
    assert len(scope["row"]) == 1


def test_simulator_simulate_is_the_same_function() -> None:
    """The page says `from simulator import simulate` is moesim.simulate."""
    import moesim
    from simulator import simulate

    assert simulate is moesim.simulate


@pytest.mark.parametrize(
    ("page", "index"), [(page, i) for page in ("api.md", "getting-started.md") for i in range(len(_snippets(page)))]
)
def test_every_python_snippet_runs(page: str, index: int, capsys, monkeypatch) -> None:
    """Each ```python block of the page runs without error from the repository root and simulates a report."""
    monkeypatch.chdir(DOCS.parent)  # the snippets name example files relative to the repository
    scope: dict = {}
    exec(compile(_snippets(page)[index], f"docs/{page}", "exec"), scope)  # noqa: S102 - our own documentation
    assert scope["report"].step_time_s > 0
