"""Storage of memory chunks: the rows are the truth, the index is derived from them.

`memory` does not import `bot`, so it has its own declarative base; the table is created by
the migration `0002_memory` in the same database as the rest of Steelframe.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, BigInteger, DateTime, Index, Integer, String, Text, text
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit id.
ChunkId = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps no zone of its own)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; pass an aware UTC datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class MemoryBase(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime()}


class MemoryChunk(MemoryBase):
    __tablename__ = "memory_chunks"
    __table_args__ = (
        Index("ix_memory_chunks_recent", "repo", "source", "id"),
        # One live chunk per key: a re-delivered webhook or a re-run summary replaces, never
        # duplicates (memory.chunks.add_chunk).
        Index(
            "uq_memory_chunks_live_key",
            "key",
            unique=True,
            sqlite_where=text("live"),
            postgresql_where=text("live"),
        ),
        {"sqlite_autoincrement": True},  # ids never reused: the index catches up by id
    )

    id: Mapped[int] = mapped_column(ChunkId, primary_key=True, autoincrement=True)
    key: Mapped[str | None] = mapped_column(String(300))
    source: Mapped[str] = mapped_column(String(40))
    repo: Mapped[str] = mapped_column(String(200))
    issue: Mapped[int | None]
    session_id: Mapped[str | None] = mapped_column(String(64))
    paths: Mapped[list[Any]] = mapped_column(JSON, default=list)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]
    # False once a newer chunk with the same key replaced it; kept so the index can tell
    # exactly what the replaced chunk had counted.
    live: Mapped[bool] = mapped_column(default=True)
    replaces: Mapped[int | None] = mapped_column(ChunkId)
    # When the source last changed the text (GitHub's `updated_at`; migration
    # 0029_memory_source_updated_at), None if unknown: an older text never replaces it.
    source_updated_at: Mapped[datetime | None]


class DatabaseIdentity(MemoryBase):
    """One row: a random id for this database, also written into the index manifest, so an
    index under a data directory is never read against another database."""

    __tablename__ = "memory_identity"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    identity: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime]
