"""Committed memory: markdown files under `docs/memory/` in an agent's checkout.

They outrank retrieval (a reviewed PR put them there), so Chat injects them first, always,
within a size budget: files in path order, whole while they fit, the first that does not fit
cut at the budget, the rest named as omitted. Only regular `.md` files that really live under
`docs/memory/` are read (a symlink out of the checkout is skipped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

COMMITTED_DIR = ("docs", "memory")
DEFAULT_BUDGET = 8_000  # characters of committed memory per turn
MAX_FILES = 100
MIN_PARTIAL = 200  # a cut shorter than this is omitted rather than shown as a stub


@dataclass(frozen=True)
class CommittedFile:
    path: str  # relative to the checkout, e.g. docs/memory/deploys.md
    text: str
    truncated: bool = False


@dataclass(frozen=True)
class CommittedMemory:
    files: list[CommittedFile] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # unreadable or outside the folder


def read_committed(checkout: Path, *, budget: int = DEFAULT_BUDGET) -> CommittedMemory:
    folder = checkout.joinpath(*COMMITTED_DIR)
    if not folder.is_dir():
        return CommittedMemory()
    real_folder = folder.resolve()
    files: list[CommittedFile] = []
    omitted: list[str] = []
    skipped: list[str] = []
    remaining = budget
    candidates = sorted(p for p in folder.rglob("*.md"))[:MAX_FILES]
    for path in candidates:
        relative = path.relative_to(checkout).as_posix()
        real = path.resolve()
        if not real.is_relative_to(real_folder) or not real.is_file():
            skipped.append(relative)
            continue
        try:
            with open(real, encoding="utf-8", errors="replace") as handle:
                text = handle.read(remaining + 1).strip()
        except OSError:
            skipped.append(relative)
            continue
        if not text:
            continue
        if len(text) <= remaining:
            files.append(CommittedFile(relative, text))
            remaining -= len(text)
        else:  # path order is priority: nothing after the first file that does not fit
            if remaining >= MIN_PARTIAL:
                cut = text[:remaining].rstrip() + "…"
                files.append(CommittedFile(relative, cut, truncated=True))
            else:
                omitted.append(relative)
            remaining = 0
    return CommittedMemory(files, omitted, skipped)


RELATED_FILE = "related.yml"  # docs/memory/related.yml: the repository's own related terms
RELATED_MAX_BYTES = 64_000
RELATED_MAX_GROUPS = 2_000


def read_related(checkout: Path) -> tuple[str, ...]:
    """The optional `related:` table of the repository's committed memory
    (`docs/memory/related.yml`): a list of groups, each a string of comma-separated words
    that name the same thing in this project ("hub, broker, emqx"), in memory.related's
    syntax. Missing, unreadable, too big or malformed: no groups (logged by the caller as
    nothing; a bad table never fails a turn)."""
    folder = checkout.joinpath(*COMMITTED_DIR)
    path = folder / RELATED_FILE
    try:
        real = path.resolve()
        if not real.is_relative_to(folder.resolve()) or not real.is_file():
            return ()
        if real.stat().st_size > RELATED_MAX_BYTES:
            return ()
        data = yaml.safe_load(real.read_text(encoding="utf-8", errors="replace"))
    except (OSError, yaml.YAMLError):
        return ()
    groups = data.get("related") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        return ()
    return tuple(g for g in groups if isinstance(g, str) and g.strip())[:RELATED_MAX_GROUPS]
