"""Processing stored deliveries after they were acknowledged.

New deliveries come through an in-memory queue; each batch is claimed atomically in the
database first (so one process handles a delivery even with several `serve` instances),
dispatched through the router in arrival order, and its results recorded in the same
transaction that claims the next batch, on a connection of the processor's own (see
`webhooks.connection`). While acknowledgements are being written, processing waits (a
little), so under load it runs in small steady batches beside intake, never as a burst.
Deliveries a crash left behind are found by a sweep: at start-up every
`received` row, and periodically rows `received` longer than a grace period or
`processing` past their lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import orjson
from gidgethub.routing import Router
from gidgethub.sansio import Event

from bot.db import Database
from webhooks.connection import dedicated_connection
from webhooks.deliveries import (
    DeliveryStatus,
    Finished,
    claim_stale,
    claim_statement,
    finish,
    finish_statements,
)
from webhooks.routing import WebhookContext
from webhooks.writer import DeliveryWriter

log = logging.getLogger("steelframe.webhooks")
BATCH = 500
# A delivery still `received` after this long was lost from its process's queue.
GRACE_SECONDS = 30.0
# A delivery `processing` longer than this belongs to a process that died.
LEASE_SECONDS = 600.0
SWEEP_SECONDS = 60.0
INTAKE_PRIORITY_SECONDS = 0.1
YIELD_EVERY = 16


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
        self._pending: deque[Pending] = deque()
        self._arrived = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._busy = False
        # Claims and outcomes of new deliveries go through a connection of their own, so
        # processing never waits for (or holds) the shared thread pool or the writer's.
        self._statuses = dedicated_connection(self.db, name="webhook-processor")

    def submit(self, delivery_id: str, event: str, data: Any) -> None:
        self._idle.clear()
        self._pending.append(Pending(delivery_id, event, data))
        self._arrived.set()

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
        await self._statuses.close()

    async def drain(self) -> None:
        """Wait until every submitted delivery has been processed (tests, shutdown)."""
        while self._pending or self._busy:
            self._idle.clear()
            await self._idle.wait()

    # -- the queue -------------------------------------------------------------------------

    async def _consume(self) -> None:
        unrecorded: list[Finished] = []  # outcomes written with the next claim
        while True:
            if not self._pending:
                if unrecorded:
                    await self._record(unrecorded, [])
                    unrecorded = []
                self._busy = False
                self._idle.set()
                while not self._pending:
                    self._arrived.clear()
                    await self._arrived.wait()
            self._busy = True
            await self._yield_to_intake()
            batch = [self._pending.popleft() for _ in range(min(BATCH, len(self._pending)))]
            claimed = await self._record(unrecorded, batch)
            unrecorded = []
            try:
                for n, item in enumerate(claimed, 1):
                    unrecorded.append(await self.dispatch(item))
                    if n % YIELD_EVERY == 0:
                        await asyncio.sleep(0)  # let requests in: handlers may not await
            except Exception:
                # Outcomes so far are still recorded; the rest come back after the lease.
                log.exception("processing %d webhook deliveries failed", len(claimed))

    async def _record(self, results: list[Finished], batch: list[Pending]) -> list[Pending]:
        """In one transaction on the processor's own connection: record the last batch's
        outcomes and claim the next batch; returns what was claimed, in arrival order. On
        failure nothing changed: claimed-but-unrecorded rows come back after the lease,
        unclaimed ones after the grace period (handlers are idempotent)."""
        now = self.ctx.clock()
        dialect = self._statuses.dialect
        statements = finish_statements(dialect, results, now)
        if batch:
            ids = [item.delivery_id for item in batch]
            statements.append(claim_statement(dialect, ids, now))
        if not statements:
            return []
        try:
            rows = await self._statuses.transaction(statements)
        except Exception:
            log.exception(
                "recording %d and claiming %d webhook deliveries failed", len(results), len(batch)
            )
            return []
        claimed = {row[0] for row in rows[-1]} if batch else set()
        taken = []
        for item in batch:
            if item.delivery_id in claimed:
                claimed.discard(item.delivery_id)  # a second copy in the batch is not taken
                taken.append(item)
        return taken

    async def _yield_to_intake(self) -> None:
        """Processing waits while acknowledgements are being written, but never longer than
        INTAKE_PRIORITY_SECONDS, so it cannot starve (and batches stay small and steady)."""
        if self.writer is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.writer.quiet(), INTAKE_PRIORITY_SECONDS)

    async def _handle(self, batch: list[Pending]) -> None:
        if not batch:
            return
        results = [await self.dispatch(item) for item in batch]
        await self.db.run(finish, results, now=self.ctx.clock())

    async def dispatch(self, item: Pending) -> Finished:
        """Run every handler routed for the delivery. Each runs even if another failed
        (remembering text must not cost a task its pickup); any failure marks the delivery
        failed with every reason."""
        event = Event(item.data, event=item.event, delivery_id=item.delivery_id)
        handlers = self.router.fetch(event)
        if not handlers:
            return Finished(item.delivery_id, DeliveryStatus.IGNORED)
        failures = []
        for handler in handlers:
            try:
                await handler(event, self.ctx)
            except Exception as exc:
                log.exception(
                    "webhook %s (%s) failed in %s",
                    item.delivery_id,
                    item.event,
                    getattr(handler, "__qualname__", handler),
                )
                failures.append(f"{type(exc).__name__}: {exc}")
        if failures:
            return Finished(item.delivery_id, DeliveryStatus.FAILED, "; ".join(failures))
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
                    batch.append(Pending(delivery_id, event, payload_of(body)))
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


def payload_of(body: str) -> Any:
    """The payload of a stored body: JSON, or a form whose `payload` field is the JSON (a
    repository hook can be configured to send that; see `webhooks.receiver`)."""
    if body.startswith("payload="):
        body = parse_qs(body).get("payload", [""])[0]
    # orjson.JSONDecodeError is a ValueError.
    return orjson.loads(body)
