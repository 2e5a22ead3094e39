"""The documentation holds together: every page of mkdocs.yml's nav exists and every page of docs/ is in it, and
every relative link of README.md, CHANGELOG.md and docs/*.md reaches a file (and, into a page, a heading)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _nav_pages(nav: list) -> list[str]:
    pages: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_nav_pages_exist_and_every_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs" and config["theme"]["name"] == "material"
    nav = _nav_pages(config["nav"])
    assert [page for page in nav if not (DOCS / page).is_file()] == []
    assert sorted(p.name for p in DOCS.glob("*.md")) == sorted(nav)


def _slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc makes it (code marks and link targets dropped)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # code blocks hold no links
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        missing_anchor = anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved)
        if not resolved.exists() or missing_anchor:
            broken.append(target)
    assert broken == []


def test_docs_link_only_inside_docs() -> None:
    """The site is built from docs/ alone: a page that linked outside it would break the strict build."""
    for page in DOCS.glob("*.md"):
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for target in LINK.findall(text):
            if not re.match(r"[a-z]+:", target) and target.partition("#")[0]:
                assert (page.parent / target.partition("#")[0]).resolve().parent == DOCS.resolve(), (page.name, target)
