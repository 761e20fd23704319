"""The chunk store: validated chunks with provenance, written in the caller's transaction.

Other parts (the chat summary sink, webhooks, workers) call `add_chunk(s)` with their open
`Session`; the index catches up from the rows (`memory.sync`), so a chunk is never lost
between the database and the index, whichever process wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, bindparam, func, or_, select, update
from sqlalchemy.orm import Session

from memory.errors import ChunkError, TooBroad
from memory.models import MemoryChunk
from memory.secrets import masked
from memory.segment import Record

MAX_TEXT_CHARS = 50_000
MAX_PATHS = 200
MAX_PATH_CHARS = 500
MAX_KEY_CHARS = 300
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
Now = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


class ChunkSource(StrEnum):
    CHAT_SUMMARY = "chat_summary"
    WORKER_SESSION = "worker_session"
    ISSUE = "issue"
    PULL_REQUEST = "pull_request"
    COMMENT = "comment"
    COMMITTED_MEMORY = "committed_memory"
    NOTE = "note"  # seeded by an operator (`steelframe memory add`)


@dataclass(frozen=True)
class ChunkIn:
    """A chunk to store. `key` makes adding idempotent: the same key with the same content
    is a no-op, with new content it replaces the old chunk (an edited comment, say)."""

    text: str
    source: ChunkSource | str
    repo: str
    issue: int | None = None
    session_id: str | None = None
    paths: Sequence[str] = ()
    key: str | None = None
    # When its source last changed this text (GitHub's `updated_at`), if known: under a key,
    # an older text never replaces a newer one (an edit delivered after a later edit).
    source_updated_at: datetime | None = None

    def validated(self) -> ChunkIn:
        try:
            source = ChunkSource(self.source)
        except ValueError:
            allowed = ", ".join(s.value for s in ChunkSource)
            raise ChunkError(f"source {self.source!r} is not one of {allowed}") from None
        text = self.text.strip() if isinstance(self.text, str) else ""
        if not text:
            raise ChunkError("text is required")
        if len(text) > MAX_TEXT_CHARS:
            raise ChunkError(f"text is longer than {MAX_TEXT_CHARS} characters")
        # Token-shaped text never reaches the rows, the index or a prompt (memory.secrets).
        # The mask can be longer than a short header value: cut, so text that was within
        # the limit (a webhook sink cuts to it) never fails for being masked.
        text = masked(text)[:MAX_TEXT_CHARS]
        if not isinstance(self.repo, str) or not _REPO.match(self.repo):
            raise ChunkError(f"repo {self.repo!r} must look like owner/name")
        if self.issue is not None and (
            isinstance(self.issue, bool) or not isinstance(self.issue, int) or self.issue <= 0
        ):
            raise ChunkError("issue must be a positive integer")
        paths = tuple(self.paths)
        if len(paths) > MAX_PATHS or not all(
            isinstance(p, str) and p.strip() and len(p) <= MAX_PATH_CHARS for p in paths
        ):
            raise ChunkError(f"paths must be at most {MAX_PATHS} non-empty strings")
        if self.session_id is not None and not (0 < len(self.session_id) <= 64):
            raise ChunkError("session_id must be 1 to 64 characters")
        if self.key is not None and not (0 < len(self.key) <= MAX_KEY_CHARS):
            raise ChunkError(f"key must be 1 to {MAX_KEY_CHARS} characters")
        changed = self.source_updated_at
        if changed is not None and (not isinstance(changed, datetime) or changed.tzinfo is None):
            raise ChunkError("source_updated_at must be an aware datetime")
        return ChunkIn(
            text, source, self.repo, self.issue, self.session_id, paths, self.key, changed
        )


@dataclass(frozen=True)
class Added:
    id: int
    created: bool  # False: the same chunk (or a newer one) was already stored under this key
    replaced: int | None = None
    # True: the stored chunk's source changed after this text did (an edit delivered late),
    # so the stored one was kept.
    older: bool = False


def add_chunk(session: Session, chunk: ChunkIn, *, clock: Now = utcnow) -> Added:
    """Store one chunk in the caller's transaction (validated first: ChunkError)."""
    chunk = chunk.validated()
    previous = None
    if chunk.key is not None:
        previous = session.scalar(
            select(MemoryChunk)
            .where(MemoryChunk.key == chunk.key, MemoryChunk.live.is_(True))
            .with_for_update()
        )
        if previous is not None and _older(chunk, previous):
            return Added(previous.id, created=False, older=True)
        if previous is not None and _same(previous, chunk):
            if _newer(chunk, previous):
                previous.source_updated_at = chunk.source_updated_at
                session.flush()
            return Added(previous.id, created=False)
        if previous is not None:
            previous.live = False
            session.flush()  # the partial unique index allows one live row per key
    row = MemoryChunk(
        key=chunk.key,
        source=str(chunk.source),
        repo=chunk.repo,
        issue=chunk.issue,
        session_id=chunk.session_id,
        paths=list(chunk.paths),
        text=chunk.text,
        created_at=clock(),
        live=True,
        replaces=previous.id if previous is not None else None,
        source_updated_at=chunk.source_updated_at,
    )
    session.add(row)
    session.flush()
    return Added(row.id, created=True, replaced=row.replaces)


def add_chunks(session: Session, chunks: Sequence[ChunkIn], *, clock: Now = utcnow) -> list[Added]:
    validated = [chunk.validated() for chunk in chunks]  # all or nothing
    return [add_chunk(session, chunk, clock=clock) for chunk in validated]


RETRACTED = "[retracted]"


def retract(session: Session, key: str, *, clock: Now = utcnow) -> int | None:
    """Forget the chunk stored under `key` in the caller's transaction (a deleted comment, a
    fact the operator asked to forget): the id of the chunk forgotten, None if no live one.

    Every version's text under the key is overwritten (an edited comment's earlier text is
    forgotten too), and a row that is not live and `replaces` the forgotten chunk is added:
    `memory.sync` meets it above its watermark and tombstones the chunk like a replaced one,
    marked scrubbed (the next merge rewrites its segment without it); a rebuild skips it. The
    same key added again later is a new chunk.
    """
    forgotten = retract_key(session, key, clock=clock)
    return None if forgotten is None else forgotten.id


def retract_key(session: Session, key: str, *, clock: Now = utcnow) -> Forgotten | None:
    """`retract`, saying what was forgotten (None: no live chunk under the key)."""
    previous = session.scalar(
        select(MemoryChunk)
        .where(MemoryChunk.key == key, MemoryChunk.live.is_(True))
        .with_for_update()
    )
    return None if previous is None else _retract_row(session, previous, clock=clock)


@dataclass(frozen=True)
class Forgotten:
    """A chunk forgotten, by where it came from (never by its text: what shows it, a CLI's
    output or a Chat reply, must not repeat what was taken out)."""

    id: int
    key: str | None
    source: str
    issue: int | None

    @property
    def provenance(self) -> str:
        about = f" on #{self.issue}" if self.issue is not None else ""
        key = f", key {self.key}" if self.key else ""
        return f"chunk {self.id} ({self.source}{about}{key})"


def _retract_row(session: Session, previous: MemoryChunk, *, clock: Now) -> Forgotten:
    """`retract` of one live row (a row without a key forgets only its own text)."""
    previous.live = False
    session.flush()
    keyed = previous.key is not None
    versions = MemoryChunk.key == previous.key if keyed else MemoryChunk.id == previous.id
    session.execute(
        update(MemoryChunk)
        .where(versions)
        .values(text=RETRACTED, paths=[])
        .execution_options(synchronize_session="fetch")
    )
    session.add(
        MemoryChunk(
            key=previous.key,
            source=previous.source,
            repo=previous.repo,
            issue=previous.issue,
            session_id=previous.session_id,
            paths=[],
            text=RETRACTED,
            created_at=clock(),
            live=False,
            replaces=previous.id,
        )
    )
    session.flush()
    return Forgotten(previous.id, previous.key, previous.source, previous.issue)


# What GitHub's deleted or transferred issue takes with it: its own text and its comments.
ISSUE_THREAD = (ChunkSource.ISSUE, ChunkSource.COMMENT)


def retract_issue(
    session: Session,
    repo: str,
    issue: int,
    *,
    sources: Collection[ChunkSource] | None,
    clock: Now = utcnow,
) -> list[Forgotten]:
    """Forget the live chunks of these `sources` (None: every source) about an issue or PR
    of `repo` in the caller's transaction, each as `retract` does, oldest first. A deleted
    or transferred issue takes ISSUE_THREAD, what GitHub held of it; a worker session or a
    note about it is not GitHub's text and stays."""
    statement = select(MemoryChunk).where(
        MemoryChunk.repo == repo, MemoryChunk.issue == issue, MemoryChunk.live.is_(True)
    )
    if sources is not None:
        statement = statement.where(MemoryChunk.source.in_([str(s) for s in sources]))
    rows = session.scalars(statement.order_by(MemoryChunk.id).with_for_update()).all()
    return [_retract_row(session, row, clock=clock) for row in rows]


def retract_saying(
    session: Session, repo: str, phrase: str, *, at_most: int, clock: Now = utcnow
) -> list[Forgotten]:
    """Forget the live chunks of `repo` whose text contains `phrase` (case aside), each as
    `retract` does, oldest first; more than `at_most` of them: TooBroad, nothing forgotten."""
    escaped = phrase.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = session.scalars(
        select(MemoryChunk)
        .where(
            MemoryChunk.repo == repo,
            MemoryChunk.live.is_(True),
            func.lower(MemoryChunk.text).like(f"%{escaped}%", escape="\\"),
        )
        .order_by(MemoryChunk.id)
        .limit(at_most + 1)
        .with_for_update()
    ).all()
    if len(rows) > at_most:
        raise TooBroad(
            f"more than {at_most} chunks say that; nothing was forgotten", matched=len(rows)
        )
    return [_retract_row(session, row, clock=clock) for row in rows]


def _older(chunk: ChunkIn, row: MemoryChunk) -> bool:
    return (
        chunk.source_updated_at is not None
        and row.source_updated_at is not None
        and chunk.source_updated_at < row.source_updated_at
    )


def _newer(chunk: ChunkIn, row: MemoryChunk) -> bool:
    return chunk.source_updated_at is not None and (
        row.source_updated_at is None or chunk.source_updated_at > row.source_updated_at
    )


def _same(row: MemoryChunk, chunk: ChunkIn) -> bool:
    return (
        row.text == chunk.text
        and row.source == str(chunk.source)
        and row.repo == chunk.repo
        and row.issue == chunk.issue
        and row.session_id == chunk.session_id
        and list(row.paths or []) == list(chunk.paths)
    )


_COLUMNS = (
    MemoryChunk.id,
    MemoryChunk.source,
    MemoryChunk.repo,
    MemoryChunk.text,
    MemoryChunk.issue,
    MemoryChunk.session_id,
    MemoryChunk.paths,
    MemoryChunk.created_at,
    MemoryChunk.live,
    MemoryChunk.replaces,
)


@dataclass(frozen=True)
class Row:
    """A chunk row as the index needs it (plain columns: no ORM identity map to grow)."""

    record: Record
    live: bool
    replaces: int | None


def _row(values: Any) -> Row:
    (chunk_id, source, repo, text, issue, session_id, paths, created, live, replaces) = values
    record = Record(
        id=int(chunk_id),
        source=source,
        repo=repo,
        text=text,
        issue=issue,
        session_id=session_id,
        paths=tuple(paths or ()),
        created_at=created.isoformat() if created is not None else None,
    )
    return Row(record, bool(live), replaces)


def rows_after(session: Session, *, watermark: int, gaps: Sequence[int], limit: int) -> list[Row]:
    """Rows the index has not seen: above the watermark, or in its gaps; ascending ids."""
    condition = _unseen(watermark, gaps)
    statement = select(*_COLUMNS).where(condition).order_by(MemoryChunk.id).limit(limit)
    return [_row(values) for values in session.execute(statement)]


def current_texts(
    session: Session, replaced: Sequence[int], *, every_version_of: Sequence[int] = ()
) -> dict[int, str]:
    """The text the database holds now of each replaced chunk, and of every version under
    the key of each of `every_version_of` (retracted chunks: a retraction overwrites every
    version's text, the earlier ones the index tombstoned before too). What the index
    compares its copies with (`Update.scrub`). Versions are looked up only for retractions:
    `key` has no index of its own (a retraction's own update scans as well)."""
    if not replaced:
        return {}
    rows = session.execute(
        select(MemoryChunk.id, MemoryChunk.key, MemoryChunk.text).where(
            MemoryChunk.id.in_(list(replaced))
        )
    ).all()
    texts = {int(chunk_id): text for chunk_id, _key, text in rows}
    wanted = set(every_version_of)
    keys = sorted({key for chunk_id, key, _text in rows if key is not None and chunk_id in wanted})
    if keys:
        versions = select(MemoryChunk.id, MemoryChunk.text).where(MemoryChunk.key.in_(keys))
        texts.update((int(chunk_id), text) for chunk_id, text in session.execute(versions))
    return texts


def any_after(session: Session, *, watermark: int, gaps: Sequence[int]) -> bool:
    """Is there a row `rows_after` would return? (An id, not the row: a cheap probe.) Every
    chat turn asks before it searches, so the common case (no gaps) is a statement built
    once, run on the session's connection (the ORM's result set-up was most of its cost)."""
    if gaps:
        statement = select(MemoryChunk.id).where(_unseen(watermark, gaps)).limit(1)
        return session.connection().execute(statement).first() is not None
    return session.connection().execute(_ANY_ABOVE, {"watermark": watermark}).first() is not None


_ANY_ABOVE = select(MemoryChunk.id).where(MemoryChunk.id > bindparam("watermark")).limit(1)


def _unseen(watermark: int, gaps: Sequence[int]) -> ColumnElement[bool]:
    condition = MemoryChunk.id > watermark
    if gaps:
        condition = or_(condition, MemoryChunk.id.in_(list(gaps)))
    return condition


def iter_rows(session: Session, *, batch: int) -> Iterator[list[Row]]:
    """Every row (live or replaced), ascending ids, streamed in batches."""
    statement = select(*_COLUMNS).order_by(MemoryChunk.id).execution_options(yield_per=batch)
    for part in session.execute(statement).partitions(batch):
        yield [_row(values) for values in part]


def count_live(session: Session) -> int:
    statement = select(func.count()).select_from(MemoryChunk).where(MemoryChunk.live.is_(True))
    return int(session.scalar(statement) or 0)


def recent(session: Session, *, repo: str, source: ChunkSource, limit: int) -> list[Record]:
    """The newest live chunks of one source in a repository (the recency fallback)."""
    statement = (
        select(*_COLUMNS)
        .where(
            MemoryChunk.repo == repo,
            MemoryChunk.source == source.value,
            MemoryChunk.live.is_(True),
        )
        .order_by(MemoryChunk.id.desc())
        .limit(limit)
    )
    return [_row(values).record for values in session.execute(statement)]


def newest(session: Session, *, repo: str, limit: int) -> list[Record]:
    """The newest live chunks of a repository, any source (what domain words are learned
    from: memory.domain)."""
    statement = (
        select(*_COLUMNS)
        .where(MemoryChunk.repo == repo, MemoryChunk.live.is_(True))
        .order_by(MemoryChunk.id.desc())
        .limit(limit)
    )
    return [_row(values).record for values in session.execute(statement)]
