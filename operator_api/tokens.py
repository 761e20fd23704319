"""Operators' bearer tokens, verified against the database and remembered briefly."""

from __future__ import annotations

import time

from bot.db import Database
from bot.errors import Unauthorized
from bot.group_read import GroupRead
from bot.operators import hash_token, identities

CACHE_SECONDS = 30.0


class TokenCache:
    """Recently verified token digests -> (operator id, name), so a busy client does not
    hit the database on every request. Short-lived: a rotated token stops working soon.
    Tokens not cached are looked up together (bot.group_read): 1,000 operators opening
    chat streams within a second cost a few statements, not 1,000."""

    def __init__(self, db: Database) -> None:
        self._entries: dict[str, tuple[float, int, str]] = {}
        self._lookups = GroupRead(db, identities)

    async def operator(self, token: str, *, fresh: bool = False) -> tuple[int, str]:
        """The token's operator, or Unauthorized; `fresh`: asked of the database even when
        remembered (a long-lived stream's check again), and forgotten here if it fails."""
        digest = hash_token(token)
        cached = None if fresh else self.get(digest)
        if cached is not None:
            return cached
        identity = await self._lookups.get(digest)
        if identity is None:
            self._entries.pop(digest, None)
            raise Unauthorized("invalid bearer token")
        self.put(digest, identity.id, identity.name)
        return identity.id, identity.name

    def get(self, digest: str) -> tuple[int, str] | None:
        entry = self._entries.get(digest)
        if entry is None or time.monotonic() - entry[0] > CACHE_SECONDS:
            return None
        return entry[1], entry[2]

    def put(self, digest: str, operator_id: int, name: str) -> None:
        if len(self._entries) > 10_000:
            self._entries.clear()
        self._entries[digest] = (time.monotonic(), operator_id, name)
