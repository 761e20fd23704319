"""`ChunkSink` over `memory`'s chunk store: GitHub text becomes keyed chunks, written in
the handler's transaction; the memory index catches up from the rows (`memory.sync`)."""

from __future__ import annotations

import hashlib

from bot.markers import is_status_comment, without_markers
from memory import ChunkIn, add_chunk
from memory.chunks import MAX_TEXT_CHARS, retract
from webhooks.chunks import ChunkSource, GitHubText, Write
from webhooks.routing import RecentWrites


class MemorySink:
    def __init__(self) -> None:
        # Labeled, unlabeled, closed... deliveries carry the same text again: skip those.
        self._recent = RecentWrites()

    def write(self, chunk: GitHubText) -> Write | None:
        if is_status_comment(chunk.text):
            return None  # Steelframe's own progress and notices are not memory of the project
        fingerprint = hashlib.sha256(chunk.text.encode()).hexdigest()
        if self._recent.unchanged(chunk.ref, fingerprint):
            return None
        text = without_markers(chunk.text).strip()
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
        )
        return Write(
            apply=lambda session: add_chunk(session, row),
            committed=lambda: self._recent.wrote(chunk.ref, fingerprint),
        )

    def forget(self, ref: str) -> Write:
        # A text written again under `ref` after this is stored, whatever this process wrote.
        return Write(
            apply=lambda session: retract(session, ref),
            committed=lambda: self._recent.wrote(ref, None),
        )
