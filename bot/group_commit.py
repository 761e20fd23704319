"""Group commit for small ORM writes that many requests make at once (chat turns).

SQLite has one writer. Turns that each wrote in their own transaction from the thread pool
queued on its file lock, and a writer that finds the lock taken sleeps in SQLite's busy
handler (up to 100 ms a try) while holding a pool thread that reads then wait behind: 1,000
turns starting within a second took seconds to write their sessions. Here one batch at a
time is written: every write queued while a batch commits goes into the next one, in one
transaction, on one thread. On PostgreSQL the same saves a commit per write.

A write that fails poisons only its own batch's transaction: the batch is rolled back and
each of its writes run again alone, so a bad one (a session deleted meanwhile) fails by
itself and its neighbours commit. A write already queued completes even if its caller is
cancelled (a stopped turn still writes the session it announced).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from bot.db import Database

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_BATCH = 200  # writes per transaction: keeps row locks (PostgreSQL) held briefly


@dataclass(frozen=True)
class _Outcome:
    value: Any = None
    error: Exception | None = None


@dataclass(frozen=True)
class _Write:
    call: Callable[[Session], Any]
    future: asyncio.Future[Any]


class GroupCommit:
    def __init__(
        self,
        db: Database,
        *,
        max_batch: int = MAX_BATCH,
        prelude: Callable[[Session], Any] | None = None,
    ) -> None:
        self.db = db
        self._max_batch = max_batch
        # Run first in every transaction: the lock every write of the batch needs, taken
        # before any of them takes another, so the locks are always taken in one order
        # (chat: the forget epoch, bot.chat.pending_forgets).
        self._prelude = prelude
        self._queued: list[_Write] = []
        self._writer: asyncio.Task[None] | None = None
        self.batches = 0  # for tests and benchmarks: how many transactions were used

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(session, *args, **kwargs)` committed with the writes queued beside it; its
        result, or its exception as if it had run alone."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queued.append(_Write(lambda session: fn(session, *args, **kwargs), future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="group-commit")
        return await future

    async def _write(self) -> None:
        while self._queued:
            batch = self._queued[: self._max_batch]
            del self._queued[: self._max_batch]
            outcomes = await asyncio.to_thread(self._commit, [write.call for write in batch])
            self.batches += 1
            for write, outcome in zip(batch, outcomes, strict=True):
                if write.future.done():  # its caller was cancelled; the write stands
                    continue
                if outcome.error is not None:
                    write.future.set_exception(outcome.error)
                else:
                    write.future.set_result(outcome.value)

    def _commit(self, calls: list[Callable[[Session], Any]]) -> list[_Outcome]:
        try:
            with self.db.session() as session:
                if self._prelude is not None:
                    self._prelude(session)
                values = [call(session) for call in calls]
        except Exception as exc:
            if len(calls) == 1:
                return [_Outcome(error=exc)]
            log.info(
                "a batch of %d writes failed (%s); each runs alone", len(calls), type(exc).__name__
            )
            return [self._alone(call) for call in calls]
        return [_Outcome(value=value) for value in values]

    def _alone(self, call: Callable[[Session], Any]) -> _Outcome:
        try:
            return _Outcome(value=self.db.call(self._after_prelude, call))
        except Exception as exc:
            return _Outcome(error=exc)

    def _after_prelude(self, session: Session, call: Callable[[Session], Any]) -> Any:
        if self._prelude is not None:
            self._prelude(session)
        return call(session)

    async def close(self) -> None:
        """Let the writes already queued commit."""
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)
