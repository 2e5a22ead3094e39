"""The README's Python API snippet runs."""

from __future__ import annotations

import re
from pathlib import Path


def test_readme_python_api_snippet() -> None:
    """`from simulator import simulate` works and the README snippet runs as written."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    snippet = re.search(r"## Python API\n\n```python\n(.*?)```", readme, re.DOTALL).group(1)
    assert "from simulator import simulate" in snippet
    scope: dict = {}
    exec(compile(snippet, "README.md", "exec"), scope)  # noqa: S102 - the snippet is our own README
    report = scope["report"]
    assert report.step_time_s > 0 and 0 < report.mfu < 1
    assert len(scope["row"]) == 1
