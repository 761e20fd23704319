"""How a webhook body is kept in `github_delivery_bodies`, on each database.

SQLite: compressed with lz4 (the block format, its length in front) and stored as a BLOB.
On SQLite the database's writes are made by the process that acknowledges deliveries, and
under a burst writing each ~8 KB body twice (into the WAL, then into the database file at
the checkpoint) was about 30% of that process's CPU: compressed, a body is ~2.3 KB, and the
same process stores 1.1-1.2x the deliveries a second (bench/README.md). lz4 takes ~4 us a
body each way; zlib, ~17 us to compress, would cost what it saves.

PostgreSQL: text, which the server compresses with lz4 itself (migration 0014), in its own
process.

Either way a body reads back as the exact text that was signed. SQLite rows written as text
(by versions before this one) read back as they are, so no stored body has to be rewritten.
"""

from __future__ import annotations

from typing import Any

import lz4.block
from sqlalchemy import Dialect, Text
from sqlalchemy.types import TypeDecorator

Stored = str | bytes


def packed(dialect: str, body: str) -> Stored:
    """`body` as it is written on `dialect` (a SQLAlchemy dialect name)."""
    if dialect == "sqlite":
        compressed: bytes = lz4.block.compress(body.encode("utf-8"))  # lz4 has no types
        return compressed
    return body


def unpacked(stored: Stored) -> str:
    """The text of a stored body, compressed or not."""
    if isinstance(stored, bytes):
        raw: bytes = lz4.block.decompress(stored)
        return raw.decode("utf-8")
    return stored


class StoredBody(TypeDecorator[str]):
    """A body column for the ORM: text in, text out, `packed` in between."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> Any:
        return None if value is None else packed(dialect.name, value)

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else unpacked(value)
