"""Keeping the index in step with the chunk rows: incremental catch-up and full rebuild.

Ids only grow, so the index remembers the highest id it has seen (the watermark). On
PostgreSQL an id can become visible after a higher one (its transaction committed later),
so ids skipped below the watermark are kept as gaps and looked for again until they appear
or are old enough to have been rolled back (memory.writer.GAP_TTL_SECONDS).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from memory import chunks
from memory.manifest import Manifest
from memory.segment import Record
from memory.writer import GAP_LIMIT, IndexWriter, prune_gaps

SYNC_BATCH = 5_000
REBUILD_BATCH = 5_000


@dataclass(frozen=True)
class SyncReport:
    added: int
    removed: int
    watermark: int
    behind: bool  # more rows are waiting than one call takes


def sync(session: Session, writer: IndexWriter, *, limit: int = SYNC_BATCH) -> SyncReport:
    """Index the rows added (and tombstone the chunks replaced) since the last call.

    Runs under the writer lock from reading the watermark to swapping the manifest, so two
    processes syncing at once index each row once.
    """
    with writer.update() as update:
        manifest = update.manifest
        rows = chunks.rows_after(
            session, watermark=manifest.watermark, gaps=sorted(manifest.gaps), limit=limit
        )
        replaced = [r.replaces for r in rows if r.replaces is not None]
        removed = update.tombstone(replaced)
        # A forgotten or masked chunk's old text must leave the segment files too; a row
        # that replaces without being live is a retraction (memory.chunks.retract).
        retracted = [r.replaces for r in rows if r.replaces is not None and not r.live]
        update.scrub(chunks.current_texts(session, replaced, every_version_of=retracted))
        added = update.add([r.record for r in rows if r.live])
        seen = {r.record.id for r in rows}
        watermark = max([manifest.watermark, *seen])
        now = writer.clock()
        gaps = {i: t for i, t in manifest.gaps.items() if i not in seen}
        for missing in _missing(manifest.watermark, watermark, seen):
            gaps[missing] = now
        update.catch_up(watermark=watermark, gaps=prune_gaps(gaps, now))
    return SyncReport(added, removed, watermark, behind=len(rows) >= limit)


def pending(session: Session, manifest: Manifest, *, now: float) -> bool:
    """Would `sync` change an index at `manifest`: a row above its watermark or in one of its
    gaps, or a gap old enough to drop? One indexed query and no lock, so a turn over an
    index with nothing new (the common case) costs a read, not a lock, a manifest parse and
    a write."""
    if prune_gaps(manifest.gaps, now) != manifest.gaps:
        return True
    return chunks.any_after(session, watermark=manifest.watermark, gaps=sorted(manifest.gaps))


def rebuild(
    session: Session,
    writer: IndexWriter,
    *,
    progress: Callable[[int, int], None] | None = None,
    batch: int = REBUILD_BATCH,
) -> Manifest:
    """A fresh index of every live row, swapped in whole (readers never see it half-built)."""
    total = chunks.count_live(session)
    state = _Catchup()

    def batches() -> Iterator[Sequence[Record]]:
        for rows in chunks.iter_rows(session, batch=batch):
            state.saw([r.record.id for r in rows])
            yield [r.record for r in rows if r.live]

    def report(done: int) -> None:
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(0, total)
    return writer.rebuild(batches(), catch_up=lambda: state.result(writer.clock()), progress=report)


class _Catchup:
    def __init__(self) -> None:
        self.watermark = 0
        self.missing: list[int] = []

    def saw(self, ids: list[int]) -> None:
        for chunk_id in ids:
            if chunk_id > self.watermark + 1:
                low = max(self.watermark + 1, chunk_id - GAP_LIMIT)
                self.missing.extend(range(low, chunk_id))
                if len(self.missing) > 2 * GAP_LIMIT:
                    self.missing = self.missing[-GAP_LIMIT:]
            self.watermark = max(self.watermark, chunk_id)

    def result(self, now: float) -> tuple[int, dict[int, float]]:
        return self.watermark, prune_gaps({i: now for i in self.missing}, now)


def _missing(low: int, high: int, seen: set[int]) -> Iterator[int]:
    """Ids in (low, high] not seen, newest first capped at GAP_LIMIT."""
    start = max(low + 1, high - GAP_LIMIT + 1)
    return (i for i in range(start, high + 1) if i not in seen)
