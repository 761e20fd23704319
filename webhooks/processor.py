"""Processing stored deliveries after they were acknowledged.

New deliveries come through an in-memory queue; each batch is claimed atomically in the
database first (so one process handles a delivery even with several `serve` instances),
dispatched through the router in arrival order, and its results recorded in one
transaction. Deliveries a crash left behind are found by a sweep: at start-up every
`received` row, and periodically rows `received` longer than a grace period or
`processing` past their lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event

from bot.db import Database
from webhooks.deliveries import DeliveryStatus, Finished, claim, claim_stale, finish
from webhooks.routing import WebhookContext
from webhooks.writer import DeliveryWriter

log = logging.getLogger("steelframe.webhooks")
BATCH = 500
# A delivery still `received` after this long was lost from its process's queue.
GRACE_SECONDS = 30.0
# A delivery `processing` longer than this belongs to a process that died.
LEASE_SECONDS = 600.0
SWEEP_SECONDS = 60.0
INTAKE_PRIORITY_SECONDS = 0.5


@dataclass(frozen=True)
class Pending:
    delivery_id: str
    event: str
    data: Any


class DeliveryProcessor:
    def __init__(
        self,
        router: Router,
        ctx: WebhookContext,
        *,
        writer: DeliveryWriter | None = None,
        sweep_seconds: float = SWEEP_SECONDS,
        grace_seconds: float = GRACE_SECONDS,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.router = router
        self.ctx = ctx
        self.writer = writer
        self.db: Database = ctx.db
        self.sweep_seconds = sweep_seconds
        self.grace_seconds = grace_seconds
        self.lease_seconds = lease_seconds
        self._queue: asyncio.Queue[Pending] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._busy = 0

    def submit(self, delivery_id: str, event: str, data: Any) -> None:
        self._idle.clear()
        self._queue.put_nowait(Pending(delivery_id, event, data))

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._consume(), name="webhook-processor"),
            asyncio.create_task(self._sweep_forever(), name="webhook-sweeper"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def drain(self) -> None:
        """Wait until every submitted delivery has been processed (tests, shutdown)."""
        while not (self._queue.empty() and self._busy == 0):
            self._idle.clear()
            await self._idle.wait()

    # -- the queue -------------------------------------------------------------------------

    async def _consume(self) -> None:
        while True:
            first = await self._queue.get()
            self._busy += 1
            batch = [first]
            try:
                await self._yield_to_intake()
                while len(batch) < BATCH and not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                await self._process_new(batch)
            except Exception:
                # Rows stay `received`; the sweep picks them up again.
                log.exception("processing %d webhook deliveries failed", len(batch))
            finally:
                self._busy -= 1
                for _ in batch:
                    self._queue.task_done()
                if self._queue.empty():
                    self._idle.set()

    async def _yield_to_intake(self) -> None:
        """Processing waits while acknowledgements are being written (a burst), but never
        longer than INTAKE_PRIORITY_SECONDS, so it cannot starve."""
        if self.writer is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.writer.quiet(), INTAKE_PRIORITY_SECONDS)

    async def _process_new(self, batch: list[Pending]) -> None:
        ids = [item.delivery_id for item in batch]
        claimed = set(await self.db.run(claim, ids, now=self.ctx.clock()))
        await self._handle([item for item in batch if item.delivery_id in claimed])

    async def _handle(self, batch: list[Pending]) -> None:
        if not batch:
            return
        results = [await self.dispatch(item) for item in batch]
        await self.db.run(finish, results, now=self.ctx.clock())

    async def dispatch(self, item: Pending) -> Finished:
        event = Event(item.data, event=item.event, delivery_id=item.delivery_id)
        if not self.router.fetch(event):
            return Finished(item.delivery_id, DeliveryStatus.IGNORED)
        try:
            await self.router.dispatch(event, self.ctx)
        except Exception as exc:
            log.exception("webhook %s (%s) failed in a handler", item.delivery_id, item.event)
            return Finished(item.delivery_id, DeliveryStatus.FAILED, f"{type(exc).__name__}: {exc}")
        return Finished(item.delivery_id, DeliveryStatus.PROCESSED)

    # -- recovery --------------------------------------------------------------------------

    async def recover(self, *, grace_seconds: float | None = None) -> int:
        """Process deliveries nobody is processing (see the module docstring); returns how
        many were handled. At start-up `grace_seconds=0` takes every `received` row."""
        grace = self.grace_seconds if grace_seconds is None else grace_seconds
        handled = 0
        while True:
            rows = await self.db.run(
                claim_stale,
                now=self.ctx.clock(),
                grace=grace,
                lease=self.lease_seconds,
                limit=BATCH,
            )
            if not rows:
                return handled
            batch = []
            broken = []
            for delivery_id, event, body in rows:
                try:
                    batch.append(Pending(delivery_id, event, json.loads(body)))
                except ValueError:
                    broken.append(Finished(delivery_id, DeliveryStatus.FAILED, "body is not JSON"))
            await self.db.run(finish, broken, now=self.ctx.clock())
            await self._handle(batch)
            handled += len(rows)
            log.info("recovered %d stored webhook deliveries", len(rows))

    async def _sweep_forever(self) -> None:
        first = True
        while True:
            try:
                await self.recover(grace_seconds=0.0 if first else None)
            except Exception:
                log.exception("webhook recovery sweep failed")
            first = False
            await asyncio.sleep(self.sweep_seconds)
