"""Group commit for the delivery log: concurrent deliveries share one INSERT and one commit.

A delivery is acknowledged only after its row is committed, so an acknowledged delivery
survives the process being killed. Throughput comes from batching, not from answering
early: while one batch is being written, the next requests queue up and go together.

The writer has a database connection of its own (`webhooks.connection`: on the event loop
for PostgreSQL, on its own thread for SQLite), so processing never delays an
acknowledgement by holding it, and talks to the driver directly: one multi-row
INSERT ... RETURNING, one COMMIT.
"""

from __future__ import annotations

import asyncio
import logging
from enum import StrEnum

from bot.db import Database
from webhooks.connection import dedicated_connection
from webhooks.deliveries import DeliveryStatus, NewDelivery
from webhooks.delivery_sql import insert_statements

log = logging.getLogger("steelframe.webhooks")
MAX_BATCH = 500


class Stored(StrEnum):
    NEW = "new"
    DUPLICATE = "duplicate"  # its delivery id was stored before: a redelivery
    REPLAYED = "replayed"  # new id, an earlier delivery's content: stored, never processed


class DeliveryWriter:
    def __init__(self, db: Database, *, max_batch: int = MAX_BATCH) -> None:
        self._max_batch = max_batch
        self._pending: list[tuple[NewDelivery, asyncio.Future[Stored]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._connection = dedicated_connection(db, name="webhook-writer")
        self._quiet = asyncio.Event()
        self._quiet.set()
        self.batches = 0  # for the benchmark's report

    async def record(self, delivery: NewDelivery) -> bool:
        """Store the delivery durably; True if its row is new (a replay's too), False if
        its id was already stored."""
        return await self.store(delivery) is not Stored.DUPLICATE

    async def store(self, delivery: NewDelivery) -> Stored:
        """Store the delivery durably, and say whether it was new, a duplicate or a replay."""
        future: asyncio.Future[Stored] = asyncio.get_running_loop().create_future()
        self._pending.append((delivery, future))
        self._quiet.clear()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="webhook-writer")
        return await future

    def is_quiet(self) -> bool:
        return self._quiet.is_set()

    async def quiet(self) -> None:
        """Return when no write is pending (background work yields to acknowledgements)."""
        await self._quiet.wait()

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                await self._flush_batch(batch)
        finally:
            if not self._pending:
                self._quiet.set()

    async def _flush_batch(self, batch: list[tuple[NewDelivery, asyncio.Future[Stored]]]) -> None:
        unique: dict[str, NewDelivery] = {}
        for delivery, _ in batch:
            unique.setdefault(delivery.delivery_id, delivery)
        try:
            inserted = await self._run(list(unique.values()))
        except Exception:
            log.exception("storing %d webhook deliveries failed; trying one by one", len(unique))
            inserted = await self._one_by_one(batch, list(unique.values()))
        self.batches += 1
        seen: set[str] = set()
        for delivery, future in batch:
            # Two copies of one id in the same batch: the first is the new one.
            status = inserted.get(delivery.delivery_id)
            if status is None or delivery.delivery_id in seen:
                stored = Stored.DUPLICATE
            elif status == DeliveryStatus.REPLAYED:
                stored = Stored.REPLAYED
            else:
                stored = Stored.NEW
            seen.add(delivery.delivery_id)
            if not future.done():
                future.set_result(stored)

    async def _one_by_one(
        self, batch: list[tuple[NewDelivery, asyncio.Future[Stored]]], rows: list[NewDelivery]
    ) -> dict[str, str]:
        """One bad row (or a lost connection) must not fail its neighbours."""
        inserted: dict[str, str] = {}
        for row in rows:
            try:
                inserted |= await self._run([row])
            except Exception as exc:
                log.exception("storing webhook delivery %s failed", row.delivery_id)
                for delivery, future in batch:
                    if delivery.delivery_id == row.delivery_id and not future.done():
                        future.set_exception(exc)
        return inserted

    async def _run(self, rows: list[NewDelivery]) -> dict[str, str]:
        """The status of each row that was new, by delivery id."""
        statements = insert_statements(self._connection.dialect, rows)
        inserted = (await self._connection.transaction(statements))[-1]
        return {row[0]: row[1] for row in inserted}

    async def close(self) -> None:
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
        await self._connection.close()
