"""A newcomer finds every doc from the README, and the links in the docs this checkout
gives a newcomer first lead to files that exist (and, with `#anchor`, to a heading there)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENTRY_DOCS = ["README.md", "docs/deploy.md", "docs/operations.md", "docs/configuration.md"]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_readme_links_every_doc() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", readme))
    docs = {str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md")}
    assert sorted(docs - linked) == []


def test_the_entry_docs_links_lead_somewhere() -> None:
    broken = []
    for name in ENTRY_DOCS:
        source = ROOT / name
        for target in re.findall(r"\]\(([^)\s]+)\)", source.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            path, _, anchor = target.partition("#")
            file = (source.parent / path).resolve() if path else source
            if not file.exists():
                broken.append(f"{name}: {target}")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text()):
                broken.append(f"{name}: {target} (no such heading)")
    assert broken == []
