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

from bot.db import Database
from webhooks.connection import dedicated_connection
from webhooks.deliveries import NewDelivery, insert_statements

log = logging.getLogger("steelframe.webhooks")
MAX_BATCH = 500


class DeliveryWriter:
    def __init__(self, db: Database, *, max_batch: int = MAX_BATCH) -> None:
        self._max_batch = max_batch
        self._pending: list[tuple[NewDelivery, asyncio.Future[bool]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._connection = dedicated_connection(db, name="webhook-writer")
        self._quiet = asyncio.Event()
        self._quiet.set()
        self.batches = 0  # for the benchmark's report

    async def record(self, delivery: NewDelivery) -> bool:
        """Store the delivery durably; True if new, False if its id was already stored."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
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

    async def _flush_batch(self, batch: list[tuple[NewDelivery, asyncio.Future[bool]]]) -> None:
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
            new = delivery.delivery_id in inserted and delivery.delivery_id not in seen
            seen.add(delivery.delivery_id)
            if not future.done():
                future.set_result(new)

    async def _one_by_one(
        self, batch: list[tuple[NewDelivery, asyncio.Future[bool]]], rows: list[NewDelivery]
    ) -> set[str]:
        """One bad row (or a lost connection) must not fail its neighbours."""
        inserted: set[str] = set()
        for row in rows:
            try:
                inserted |= await self._run([row])
            except Exception as exc:
                log.exception("storing webhook delivery %s failed", row.delivery_id)
                for delivery, future in batch:
                    if delivery.delivery_id == row.delivery_id and not future.done():
                        future.set_exception(exc)
        return inserted

    async def _run(self, rows: list[NewDelivery]) -> set[str]:
        statements = insert_statements(self._connection.dialect, rows)
        inserted = (await self._connection.transaction(statements))[0]
        return {row[0] for row in inserted}

    async def close(self) -> None:
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
        await self._connection.close()
