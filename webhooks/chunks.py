"""The seam to session memory: issue, pull request and comment text as chunks with
provenance. `memory` implements the store; the webhooks only see this Protocol."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from sqlalchemy.orm import Session


class ChunkSource(StrEnum):
    ISSUE = "issue"
    PULL_REQUEST = "pull_request"
    COMMENT = "comment"


@dataclass(frozen=True)
class GitHubText:
    """One piece of GitHub text, untrusted, with where it came from.

    `ref` is stable per object ("issue:owner/name#12", "comment:4567"): storing the same
    ref again (an edit, a redelivery) replaces the earlier text instead of adding a copy."""

    source: ChunkSource
    ref: str
    repo: str
    issue: int | None
    text: str
    author: str | None
    url: str | None
    created_at: datetime
    # When GitHub last changed the item (its `updated_at`), where the handler knows it:
    # deliveries about one item can arrive out of order (GitHub promises no order), and an
    # older edit delivered after a newer one must not replace it in memory.
    updated_at: datetime | None = None
    # Steelframe's own progress comment or notice: laid out as one (bot.markers.
    # opens_as_status) and written by the App (webhooks.handlers.comments). Not memory of the
    # project; anyone else's comment carrying a marker is theirs, remembered like any.
    app_status: bool = False


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Write:
    """Part of a handler's one transaction (`webhooks.handlers.common.commit`): `apply` runs
    in it, `committed` after it committed (e.g. to remember what was written)."""

    apply: Callable[[Session], object]
    committed: Callable[[], None] = _nothing


class ChunkSink(Protocol):
    def write(self, chunk: GitHubText) -> Write | None:
        """What storing `chunk` writes in the handler's transaction; None if nothing (the
        same text was just stored, or it is not memory)."""
        ...

    def forget(self, ref: str) -> Write:
        """What forgetting the text stored under `ref` writes in the handler's transaction
        (it was deleted on GitHub: no answer may quote it any more)."""
        ...
