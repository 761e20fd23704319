"""Group reads: many requests asking the same kind of question at once, one query.

Every chat stream asks two reads before its first frame (whose token is this, which session
does the turn go to). One at a time, 1,000 operators opening streams within a second cost
1,000 statements and 1,000 thread hops of each; the hops alone (a submit and a wake-up on the
loop, a GIL hand-off) were a large part of a first frame's cost. Here the keys asked while a
batch runs are answered together by the next one: one statement and one hop per batch.

A batch that fails fails every caller in it with its error (a read has no side effect to
isolate; each caller's request answers with it, as a single read's failure would).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

from sqlalchemy.orm import Session

from bot.db import Database

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
MAX_BATCH = 500  # keys per statement: far below any database's parameter limit


class GroupRead(Generic[K, V]):
    """`fetch(session, keys)` answers a batch of distinct keys as {key: value}; a key it
    leaves out reads as None."""

    def __init__(
        self,
        db: Database,
        fetch: Callable[[Session, Sequence[K]], dict[K, V]],
        *,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self.db = db
        self._fetch = fetch
        self._max_batch = max_batch
        self._waiting: dict[K, list[asyncio.Future[V | None]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.batches = 0  # for tests and benchmarks: how many statements were used

    async def get(self, key: K) -> V | None:
        future: asyncio.Future[V | None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(future)
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read(), name="group-read")
        return await future

    async def _read(self) -> None:
        while self._waiting:
            keys = list(self._waiting)[: self._max_batch]
            batch = {key: self._waiting.pop(key) for key in keys}
            try:
                found = await self.db.run_first(self._fetch, keys)
            except Exception as exc:
                for futures in batch.values():
                    for future in futures:
                        if not future.done():
                            future.set_exception(exc)
                continue
            finally:
                self.batches += 1
            for key, futures in batch.items():
                for future in futures:
                    if not future.done():  # its caller was cancelled
                        future.set_result(found.get(key))
