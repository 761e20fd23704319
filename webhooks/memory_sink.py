"""`ChunkSink` over `memory`'s chunk store: GitHub text becomes keyed chunks, written in
the handler's transaction; the memory index catches up from the rows (`memory.sync`)."""

from __future__ import annotations

import hashlib
import re

from sqlalchemy.orm import Session

from bot.lifecycle.redact import Redactor
from bot.markers import without_markers
from memory import ChunkIn, add_chunk
from memory.chunks import ISSUE_THREAD, MAX_TEXT_CHARS, retract, retract_issue
from webhooks.chunks import ChunkSource, GitHubText, Write
from webhooks.routing import RecentWrites

# The ref of an issue's own text (webhooks.handlers.issues.issue_text): forgetting it
# forgets the issue's comments too, stored under their own refs with the issue's number.
_ISSUE_REF = re.compile(r"^issue:(?P<repo>[^#\s]+)#(?P<number>[0-9]+)$")


class MemorySink:
    def __init__(self, *, redactor: Redactor | None = None) -> None:
        # Labeled, unlabeled, closed... deliveries carry the same text again: skip those.
        self._recent = RecentWrites()
        # The exact secret values this process knows (the webhook secret, the App's key,
        # minted tokens...), taken out before the text is stored; token shapes nobody told
        # us are memory's own to mask (memory.secrets).
        self._redactor = redactor if redactor is not None else Redactor()

    def write(self, chunk: GitHubText) -> Write | None:
        if chunk.app_status:
            return None  # Steelframe's own progress and notices are not memory of the project
        # The text and when it was last changed: the same text again at a later time (an
        # edit back to it, a label) is written, so the row holds the newest time and a late
        # edit from between the two stays older (add_chunk).
        fingerprint = (hashlib.sha256(chunk.text.encode()).hexdigest(), chunk.updated_at)
        if self._recent.unchanged(chunk.ref, fingerprint):
            return None
        text = without_markers(self._redactor.redact(chunk.text)).strip()
        if chunk.source is ChunkSource.COMMENT and chunk.author:
            # Who said it is part of what retrieval should show.
            where = f" on #{chunk.issue}" if chunk.issue is not None else ""
            text = f"@{chunk.author}{where}:\n{text}"
        row = ChunkIn(
            text=text[:MAX_TEXT_CHARS],
            source=str(chunk.source),
            repo=chunk.repo,
            issue=chunk.issue,
            key=chunk.ref,
            # An older edit delivered after a newer one keeps the newer (add_chunk).
            source_updated_at=chunk.updated_at,
        )
        return Write(
            apply=lambda session: add_chunk(session, row),
            committed=lambda: self._recent.wrote(chunk.ref, fingerprint),
        )

    def forget(self, ref: str) -> Write:
        """The text under `ref` forgotten; an issue's (deleted or transferred) takes its
        comments with it (memory.chunks.retract_issue)."""
        forgotten: list[str] = []
        issue = _ISSUE_REF.match(ref)

        def apply(session: Session) -> None:
            if issue is None:
                retract(session, ref)
                return
            found = retract_issue(
                session, issue["repo"], int(issue["number"]), sources=ISSUE_THREAD
            )
            forgotten.extend(f.key for f in found if f.key is not None)

        def committed() -> None:
            # A text written again under a forgotten ref after this is stored, whatever this
            # process wrote before.
            for key in {ref, *forgotten}:
                self._recent.wrote(key, None)

        return Write(apply=apply, committed=committed)
