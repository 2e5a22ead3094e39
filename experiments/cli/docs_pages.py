"""Write the generated documentation pages: ``python -m experiments.cli.docs_pages [--check]``.

--check writes nothing and exits 1 naming the pages that differ from what the code gives (the unit test
tests/unit/test_docs_reference.py does the same).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from experiments.cli.docs_cli import cli_markdown
from experiments.cli.docs_specs import megatron_flags_markdown, yaml_reference_markdown

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
VALIDATION_HEADER = """# Validation results

Copied from the `validation` section of `results/REPRODUCTION.md`, which `moesim validate` (or `moesim reproduce
validation`) writes; `python -m experiments.cli.docs_pages` copies it again after a new run, and
`tests/unit/test_docs_reference.py` fails while this page and that section differ. What the columns mean:
[Glossary](outputs.md#moesim-validate-json-and-resultsvalidationcsv); how the corpus is built:
[Validation](validation.md).
"""


def validation_markdown() -> str:
    """The validation section of results/REPRODUCTION.md under this page's own title."""
    text = (ROOT / "results" / "REPRODUCTION.md").read_text()
    start, end = text.index("<!-- validation -->"), text.index("<!-- /validation -->")
    section = text[start + len("<!-- validation -->") : end].strip("\n")
    lines = section.split("\n")
    if lines and lines[0].startswith("## "):
        lines = lines[1:]  # its own title; this page has one
    return VALIDATION_HEADER + "\n".join(lines).rstrip("\n") + "\n"


def changelog_markdown() -> str:
    """CHANGELOG.md at the repository's root, as a page of the site (mkdocs reads docs/ only)."""
    return (
        "<!-- Copied from CHANGELOG.md by python -m experiments.cli.docs_pages: edit that file. -->\n"
        + (ROOT / "CHANGELOG.md").read_text()
    )


PAGES: dict[str, Callable[[], str]] = {
    "cli.md": cli_markdown,
    "yaml-reference.md": yaml_reference_markdown,
    "megatron-flags.md": megatron_flags_markdown,
    "validation-results.md": validation_markdown,
    "changelog.md": changelog_markdown,
}


def stale(docs: Path = DOCS) -> list[str]:
    """The generated pages whose file differs from what the code gives now."""
    return [name for name, make in PAGES.items() if not (docs / name).exists() or (docs / name).read_text() != make()]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--check" in args:
        names = stale()
        for name in names:
            print(f"docs/{name} is stale: python -m experiments.cli.docs_pages", file=sys.stderr)
        return 1 if names else 0
    for name, make in PAGES.items():
        (DOCS / name).write_text(make())
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
