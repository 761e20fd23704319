"""Database connections of their own for the webhook hot paths.

Intake (`webhooks.writer`) and processing (`webhooks.processor`) each hold one, so neither
waits for a worker of the shared thread pool, nor for the other, nor for a pool checkout and
its pre-ping. A call runs a list of statements as one transaction: committed on success;
rolled back and the connection replaced on any error, so the next call starts clean.

PostgreSQL goes through psycopg's asyncio connection: the event loop waits on the socket, so
no thread has to win the GIL back from the busy loop after each call into the driver (up to
a switch interval, 5 ms, each time: that wait, not the database, was most of a batch's time
under load). SQLite has no such driver; it gets a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from bot.db import Database
from bot.executors import StartedThreadPool

if TYPE_CHECKING:  # imported where PostgreSQL is used: a SQLite service never loads it
    import psycopg

log = logging.getLogger("steelframe.webhooks")
Statement = tuple[str, Sequence[Any]]
Rows = list[tuple[Any, ...]]


class Connection(Protocol):
    dialect: str

    async def transaction(self, statements: Sequence[Statement]) -> list[Rows]:
        """Run the statements in one committed transaction; each one's rows (or [])."""
        ...

    async def close(self) -> None: ...


def dedicated_connection(db: Database, *, name: str) -> Connection:
    if db.engine.dialect.name == "postgresql":
        return LoopConnection(db)
    return ThreadConnection(db, name=name)


class LoopConnection:
    """PostgreSQL on the event loop (psycopg.AsyncConnection), opened when first used."""

    def __init__(self, db: Database) -> None:
        self.dialect = db.engine.dialect.name
        self._db = db
        self._connection: psycopg.AsyncConnection[tuple[Any, ...]] | None = None
        self._lock = asyncio.Lock()  # one transaction at a time on the one connection

    async def transaction(self, statements: Sequence[Statement]) -> list[Rows]:
        async with self._lock:
            if self._connection is None:
                self._connection = await self._connect()
            connection = self._connection
            try:
                if len(statements) == 1:
                    # In autocommit one statement is its own transaction: one round trip
                    # instead of three (BEGIN, the statement, COMMIT).
                    return [await _run(connection, *statements[0])]
                async with connection.transaction():
                    return [await _run(connection, sql, params) for sql, params in statements]
            except BaseException:  # cancelled too: the connection's state is unknown
                self._connection = None
                with contextlib.suppress(Exception):
                    await connection.close()
                raise

    async def _connect(self) -> psycopg.AsyncConnection[tuple[Any, ...]]:
        import psycopg  # ~50 ms of a start-up that uses SQLite otherwise

        engine = self._db.engine
        _, params = engine.dialect.create_connect_args(engine.url)
        params.pop("context", None)  # SQLAlchemy's adapters; these statements need none
        return await psycopg.AsyncConnection.connect(**params, autocommit=True)

    async def close(self) -> None:
        async with self._lock:
            connection, self._connection = self._connection, None
            if connection is not None:
                await connection.close()


async def _run(
    connection: psycopg.AsyncConnection[tuple[Any, ...]], sql: str, params: Sequence[Any]
) -> Rows:
    cursor = await connection.execute(sql, params)
    return await cursor.fetchall() if cursor.description else []


class ThreadConnection:
    """A pooled DBAPI connection used only on the webhook thread of its database."""

    def __init__(self, db: Database, *, name: str) -> None:
        self.dialect = db.engine.dialect.name
        self._db = db
        self._thread = _SQLITE_THREADS.take(db, name)
        self._connection: Any = None  # used only on _thread

    async def transaction(self, statements: Sequence[Statement]) -> list[Rows]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._run, statements)

    def _run(self, statements: Sequence[Statement]) -> list[Rows]:
        if self._connection is None:
            self._connection = self._db.engine.raw_connection()
        connection = self._connection
        try:
            results = []
            cursor = connection.cursor()
            try:
                for sql, params in statements:
                    cursor.execute(sql, params)
                    results.append(cursor.fetchall() if cursor.description else [])
            finally:
                cursor.close()
            connection.commit()
        except Exception:
            self._discard()
            raise
        return results

    def _discard(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.rollback()
                connection.invalidate()
            except Exception:
                log.debug("discarding a webhook connection failed", exc_info=True)

    async def close(self) -> None:
        def release() -> None:
            if self._connection is not None:
                self._connection.close()  # back to the pool
                self._connection = None

        await asyncio.get_running_loop().run_in_executor(self._thread, release)
        _SQLITE_THREADS.give(self._db)


class _SharedThreads:
    """One thread per SQLite database for every webhook connection to it. SQLite lets one
    transaction write at a time: two connections writing from two threads (intake and
    processing) make one of them sleep in SQLite's busy handler, in steps of up to 100 ms,
    while the lock is held. On one thread their transactions simply queue, each starting
    as soon as the one before commits."""

    def __init__(self) -> None:
        self._threads: dict[int, tuple[StartedThreadPool, int]] = {}

    def take(self, db: Database, name: str) -> StartedThreadPool:
        # Started here, when the writer and processor are built at start-up: not by the
        # first delivery's transaction, on the event loop (bot/executors.py).
        thread, users = self._threads.get(id(db)) or (
            StartedThreadPool(1, thread_name_prefix=name),
            0,
        )
        self._threads[id(db)] = (thread, users + 1)
        return thread

    def give(self, db: Database) -> None:
        thread, users = self._threads[id(db)]
        if users > 1:
            self._threads[id(db)] = (thread, users - 1)
            return
        del self._threads[id(db)]
        thread.shutdown(wait=True)


_SQLITE_THREADS = _SharedThreads()
