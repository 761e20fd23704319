"""A `steelframe:memory` task: the worker itself writes the fact to `docs/memory/` and the
run goes on as any delivered run does (commit, push, pull request that fixes the issue).

No coding runtime is involved: the fact is the operator's words from Chat, the file's path
comes from the issue title alone (`bot.filing.memory_path`), and nothing else in the issue
is acted on, so a memory task needs no runtime and cannot be steered into other changes.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from bot.filing import MEMORY_LABEL, MEMORY_SEPARATOR, memory_fact, memory_path
from bot.github.issue_records import Label
from bot.lifecycle.coding import CodingOutcome, CodingStatus
from bot.lifecycle.redact import mask_token_shapes


@dataclass(frozen=True)
class MemoryWrite:
    path: str  # relative to the repository root, under docs/memory/
    fact: str
    title: str


def memory_write(title: str, body: str, labels: Collection[Label]) -> MemoryWrite | None:
    """What a memory issue asks to write, or None when the issue is not one."""
    if all(label.name != MEMORY_LABEL for label in labels) or MEMORY_SEPARATOR not in body:
        return None
    # "Remember that the deploy token is ghp_..." must not commit the token to the
    # repository, in the file or in its name (the slug of the title): token-shaped text is
    # masked in both, as in everything else the worker publishes.
    fact = mask_token_shapes(memory_fact(body)).strip()
    if not fact:
        return None
    title = mask_token_shapes(title)
    return MemoryWrite(path=memory_path(title), fact=fact, title=title)


def write_memory(tree: Path, write: MemoryWrite) -> CodingOutcome:
    """Write the fact (a file already holding it is left as it is). The repository is
    untrusted: a symlink on the way (a committed `docs/memory` link) is refused rather than
    followed out of the checkout."""
    target = tree / write.path
    on_the_way = [target, *target.relative_to(tree).parents]
    if any((tree / part).is_symlink() for part in on_the_way if str(part) != "."):
        error = f"{write.path} passes through a symbolic link in the repository; not written"
        return CodingOutcome(status=CodingStatus.ERROR, error=error, log_tail=[error])
    target.parent.mkdir(parents=True, exist_ok=True)
    text = f"{write.fact}\n"
    if target.is_file() and target.read_text(encoding="utf-8") == text:
        summary = f"{write.path} already holds this fact."
    else:
        target.write_text(text, encoding="utf-8")
        summary = f"Committed memory: wrote the fact to {write.path}."
    return CodingOutcome(status=CodingStatus.DONE, summary=summary, log_tail=[summary])
