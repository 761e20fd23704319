"""Processing stored deliveries after they were acknowledged, with retries and dead letters.

New deliveries come through an in-memory queue; each batch is claimed atomically in the
database first (so one process handles a delivery even with several `serve` instances),
dispatched through the router in arrival order, and its results recorded in small groups
on a connection of the processor's own (see `webhooks.connection`). Intake comes first:
while acknowledgements are being written, processing runs in slices of 16 and takes about
PROCESSING_SHARE of the time (`_give_way`); the backlog waits, durable, in the log, and a
long queue holds ids rather than texts (`_enqueue`). Each
handler's effect commits with its "done" record (`bot.handler_runs`), so no handler runs
twice for a delivery, crash or not.

A claim names its owner and expires `lease_seconds` after its last renewal; the owner's
heartbeat renews every claim it holds, so a live process keeps its batch however long it
takes, and the batch of a process that died is taken over by a sweep (any instance, or the
restarted one) within a lease plus a sweep interval. The sweep also takes `received` rows
older than a grace period (lost from a dead process's queue; at start-up, all of them) and
`retrying` rows whose next attempt is due.

A handler that raises is retried with exponential backoff and jitter (`RetryPolicy`); a
handler that succeeded is recorded in the delivery's `outcomes` and never run again for it.
After the last attempt the delivery is `dead`: listed by `steelframe webhooks list
--failed` and the operator API, replayed by `steelframe webhooks replay`. The retries this
process recorded (`ScheduledRetries`) wake its sweep when due, and `drain` waits for them
(at shutdown, only for those already due: the others are stored for the next sweep).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

import orjson
from gidgethub.routing import Router
from gidgethub.sansio import Event

from bot.db import Database
from bot.errors import BadRequest
from bot.github.errors import GitHubRejected
from bot.handler_runs import running
from bot.log_context import log_ids
from webhooks.connection import dedicated_connection
from webhooks.deliveries import OK, Claimed, DeliveryStatus, Finished
from webhooks.delivery_retry import RetryPolicy, ScheduledRetries
from webhooks.delivery_sql import (
    bodies_statement,
    claim_stale,
    claim_statement,
    finish_statements,
    renew_statement,
)
from webhooks.installed import InstallationCheck
from webhooks.routing import WebhookContext
from webhooks.stored_bodies import unpacked
from webhooks.writer import DeliveryWriter

log = logging.getLogger("steelframe.webhooks")
BATCH = 500
# A delivery still `received` after this long was lost from its process's queue.
GRACE_SECONDS = 30.0
# A claim not renewed for this long belongs to a process that died; the owner renews its
# claims every LEASE_SECONDS / 3, so a live owner never loses one.
LEASE_SECONDS = 15.0
# How often each instance looks for stale claims, lost and due deliveries (an indexed query).
SWEEP_SECONDS = 5.0
INTAKE_PRIORITY_SECONDS = 0.1
# While deliveries arrive, processing takes at most about this share of the process's time.
PROCESSING_SHARE = 0.2
# Deliveries queued with their text (~8 KB each); later ones are queued by id, their text
# read back from the log with their claim.
MAX_QUEUED_TEXTS = 2000
# Deliveries queued in all (a hundred bytes or so each by id); more wait in the log, found
# by a scan once the queue has drained.
MAX_QUEUED = 100_000
# Outcomes are committed at least every this many deliveries: a crash re-runs at most
# that many handlers that had already succeeded (they are idempotent).
RECORD_EVERY = 16
# Failures no retry can fix: the delivery is dead at once.
PERMANENT = (BadRequest, GitHubRejected)


@dataclass(frozen=True, slots=True)
class Pending:
    """A delivery waiting to be processed: its payload, or (`body`) the stored text to
    parse when its turn comes, or neither (`read_back`): the text is read from the log
    with its claim."""

    delivery_id: str
    event: str
    data: Any
    attempt: int = 1
    outcomes: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    read_back: bool = False


def handler_name(handler: Any) -> str:
    """A handler's stable name in `outcomes` (module and qualified name)."""
    return f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', handler)}"


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
        retry: RetryPolicy | None = None,
        max_queued: int = MAX_QUEUED,
        max_queued_texts: int = MAX_QUEUED_TEXTS,
    ) -> None:
        self.router = router
        self.ctx = ctx
        self.writer = writer
        self.db: Database = ctx.db
        self.sweep_seconds = sweep_seconds
        self.grace_seconds = grace_seconds
        self.lease_seconds = lease_seconds
        self.retry = retry or RetryPolicy()
        self.max_queued = max_queued
        self.max_queued_texts = max_queued_texts
        self._texts = 0  # queued deliveries that hold their text or payload
        self._overflowed = False  # deliveries left `received` in the log: take them from there
        # Names this process's claims; a claim is written back only by its owner.
        self.owner = uuid.uuid4().hex[:16]
        self._pending: deque[Pending] = deque()
        self._arrived = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._busy = False
        self._sweeps = 0  # recovery sweeps under way: they claim and process past the queue
        self._held: set[str] = set()  # claims taken, not yet recorded: the heartbeat renews them
        self._retries = ScheduledRetries()  # recorded `retrying` here: the sweep's to run
        self._wake = asyncio.Event()  # the sweep's sleep: a retry now falls due sooner
        # Claims and outcomes go through a connection of their own, so processing never
        # waits for (or holds) the shared thread pool or the writer's.
        self._statuses = dedicated_connection(self.db, name="webhook-processor")
        self._installed = InstallationCheck()

    def submit(self, delivery_id: str, event: str, data: Any) -> None:
        self._enqueue(Pending(delivery_id, event, data))

    def submit_stored(self, delivery_id: str, event: str, body: str) -> None:
        """Queue a delivery by its stored text, parsed again when it is processed. Under a
        burst the queue holds thousands of deliveries: as text they are a string each,
        which the garbage collector never looks at; as parsed payloads they are hundreds
        of objects each, promoted to the oldest generation, whose full collections then
        stopped every request for up to ~300 ms (bench/webhooks_probot.py, p99)."""
        self._enqueue(Pending(delivery_id, event, None, body=body))

    def _enqueue(self, item: Pending) -> None:
        """Queue a delivery. During a burst intake outruns processing (which gives way to
        it), so the queue grows: past `max_queued_texts` a delivery is queued by its id
        alone (its text is read back from the log with its claim, in the same statement
        batch, instead of held in memory), and past `max_queued` it is not queued at all:
        it stays `received` in the log, and the processor scans for it once its queue has
        drained."""
        self._idle.clear()
        if len(self._pending) >= self.max_queued:
            self._overflowed = True
        elif self._texts >= self.max_queued_texts:
            self._pending.append(Pending(item.delivery_id, item.event, None, read_back=True))
        else:
            self._pending.append(item)
            self._texts += 1
        self._arrived.set()

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._consume(), name="webhook-processor"),
            asyncio.create_task(self._sweep_forever(), name="webhook-sweeper"),
            asyncio.create_task(self._heartbeat_forever(), name="webhook-heartbeat"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self._statuses.close()

    async def drain(self, *, retries_within: float | None = None) -> None:
        """Wait until every delivery this process is to process has been processed: the
        queue, the batch in hand, what a sweep claimed (the start-up sweep takes `received`
        rows at once), and each retry this process scheduled that falls due within
        `retries_within` seconds of the call, until it succeeds or the delivery is dead (a
        retry that fails again is waited for while its next one is within the bound too).
        None (tests) waits for every retry, however far; a test whose handler keeps failing
        gives the processor a quick `RetryPolicy`.

        Shutdown passes 0 (steelframe.composition): a retry not yet due is stored
        (`retrying`) and another instance's sweep, or this one's next start-up sweep, takes
        it when due; waiting would hold the exit for up to the policy's `max_delay`.

        The sweep runs the retries (`start`). One that another instance took, or that an
        operator replayed, stops counting at its due time, when this process's sweep finds
        nothing due (`ScheduledRetries.forget_due`). Deliveries left in the log (`received`
        past the queue's room, claims whose record failed) are not waited for: a sweep
        takes them after the grace period or the lease."""
        horizon = None
        if retries_within is not None:
            horizon = self.ctx.clock() + timedelta(seconds=retries_within)
        while self._pending or self._busy or self._sweeps or self._retries.waiting(horizon):
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
                if self._overflowed:
                    await self._take_overflow()
                    continue
                self._busy = False
                self._idle.set()
                while not self._pending:
                    self._arrived.clear()
                    await self._arrived.wait()
            self._busy = True
            await self._yield_to_intake()
            batch = [self._pending.popleft() for _ in range(min(BATCH, len(self._pending)))]
            self._texts -= sum(not item.read_back for item in batch)
            started = time.monotonic()
            claimed = await self._record(unrecorded, batch)
            unrecorded = []
            try:
                # The claim (and the texts read back with it) counts toward the first slice.
                unrecorded = await self._run(claimed, started=started)
            except Exception:
                # Outcomes so far are recorded; the rest come back after the lease.
                log.exception("processing %d webhook deliveries failed", len(claimed))

    async def _take_overflow(self) -> None:
        """Process the deliveries the full queue left out (`received`, no grace:
        another instance's unclaimed ones too, which is harmless, claims being atomic)."""
        self._overflowed = False
        try:
            await self.recover(grace_seconds=0.0)
        except Exception:  # the sweep takes them after the grace period
            log.exception("taking webhook deliveries the full queue left in the log failed")

    async def _run(self, claimed: list[Pending], *, started: float | None = None) -> list[Finished]:
        """Dispatch in order, committing outcomes every RECORD_EVERY deliveries and then
        giving way to intake (`_give_way`, for the time since `started`, by default now);
        returns the last, unrecorded ones (written with the next claim)."""
        unrecorded: list[Finished] = []
        started = time.monotonic() if started is None else started
        for n, item in enumerate(claimed, 1):
            unrecorded.append(await self.dispatch(item))
            if n % RECORD_EVERY == 0:
                await self._record(unrecorded, [])
                unrecorded = []
                await self._give_way(time.monotonic() - started)
                started = time.monotonic()
        return unrecorded

    async def _record(self, results: list[Finished], batch: list[Pending]) -> list[Pending]:
        """In one transaction on the processor's own connection: record finished outcomes,
        claim the next batch and read the text of its deliveries queued by id; returns
        what was claimed, in arrival order. On failure nothing changed: claimed-but-
        unrecorded rows come back after the lease, unclaimed ones after the grace period
        (handlers are idempotent)."""
        now = self.ctx.clock()
        dialect = self._statuses.dialect
        statements = finish_statements(dialect, results, now, self.owner)
        claim_at = len(statements)
        unread = [item.delivery_id for item in batch if item.read_back]
        if batch:
            ids = [item.delivery_id for item in batch]
            statements.append(claim_statement(dialect, ids, now, self.owner))
        if unread:
            statements.append(bodies_statement(dialect, unread))
        if not statements:
            return []
        # Recorded or not, these are no longer renewed: if the write failed, their claims
        # expire and a sweep runs them again.
        self._held.difference_update(r.delivery_id for r in results)
        try:
            rows = await self._statuses.transaction(statements)
        except Exception:
            log.exception(
                "recording %d and claiming %d webhook deliveries failed", len(results), len(batch)
            )
            return []
        if self._retries.recorded(results):
            self._wake.set()
        claimed = {row[0] for row in rows[claim_at]} if batch else set()
        # The body and the row were committed together before the acknowledgement, so a
        # claimed row has one; "" (not JSON) would make the delivery dead, not lost.
        bodies = {id_: unpacked(stored) for id_, stored in rows[claim_at + 1]} if unread else {}
        taken = []
        for item in batch:
            if item.delivery_id in claimed:
                claimed.discard(item.delivery_id)  # a second copy in the batch is not taken
                if item.read_back:
                    item = replace(item, body=bodies.get(item.delivery_id, ""), read_back=False)
                taken.append(item)
        self._held.update(item.delivery_id for item in taken)
        return taken

    async def _yield_to_intake(self) -> None:
        """Processing waits while acknowledgements are being written, but never longer than
        INTAKE_PRIORITY_SECONDS, so it cannot starve (and batches stay small and steady)."""
        if self.writer is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.writer.quiet(), INTAKE_PRIORITY_SECONDS)

    async def _give_way(self, spent: float) -> None:
        """After a slice of processing that took `spent` seconds: while deliveries are still
        arriving, wait until the writer is quiet, at most long enough that processing takes
        PROCESSING_SHARE of the time. Processing and intake share one core (one event loop,
        and SQLite's thread): without this, handlers took ~40% of it during a burst and the
        acknowledged rate fell by as much. The deliveries wait in the log, durable; once the
        burst is over processing runs flat out (the backlog drains at its own rate)."""
        if self.writer is None or self.writer.is_quiet():
            await asyncio.sleep(0)  # let requests in: handlers may not await
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.writer.quiet(), spent * (1 / PROCESSING_SHARE - 1))

    # -- one delivery ----------------------------------------------------------------------

    async def dispatch(self, item: Pending) -> Finished:
        """Run the routed handlers that have not yet succeeded for this delivery. Each runs
        even if another failed (remembering text must not cost a task its pickup). Any
        failure schedules a retry, or on the last attempt (or a permanent error) makes the
        delivery dead, with every reason."""
        try:
            data = item.data if item.body is None else payload_of(item.body)
        except ValueError:  # it parsed before it was stored; a changed row would not
            return Finished(item.delivery_id, DeliveryStatus.DEAD, "body is not JSON")
        event = Event(data, event=item.event, delivery_id=item.delivery_id)
        handlers = self.router.fetch(event)
        if not handlers:
            return Finished(item.delivery_id, DeliveryStatus.IGNORED)
        try:
            why = await self._installed.not_installed(self.ctx.github, item.event, data)
        except Exception as exc:  # GitHub unreachable: ask again later, as a handler would
            return self._failed(
                item, dict(item.outcomes), f"installation check: {exc}"[:300], permanent=False
            )
        if why is not None:
            log.info("webhook %s (%s) ignored: %s", item.delivery_id, item.event, why)
            return Finished(item.delivery_id, DeliveryStatus.IGNORED, why)
        if item.attempt > self.retry.max_attempts:
            # Only crashes mid-way get a delivery here (a failure is scheduled, not claimed
            # again past the limit): stop feeding it to processes it may be killing.
            reason = f"processing was interrupted {item.attempt - 1} times"
            return Finished(item.delivery_id, DeliveryStatus.DEAD, reason, item.outcomes)
        with log_ids(delivery_id=item.delivery_id):  # on every line its handlers log
            return await self._run_handlers(item, event, handlers)

    async def _run_handlers(self, item: Pending, event: Event, handlers: Any) -> Finished:
        outcomes = dict(item.outcomes)
        failures: list[str] = []
        permanent = False
        for handler in handlers:
            name = handler_name(handler)
            if outcomes.get(name) == OK:
                continue  # succeeded on an earlier attempt
            try:
                # The handler's effect commits with its "done" record (bot.handler_runs).
                with running(item.delivery_id, name, self.ctx.clock):
                    await handler(event, self.ctx)
            except Exception as exc:
                log.warning(
                    "webhook %s (%s) attempt %d failed in %s: %s: %s",
                    item.delivery_id,
                    item.event,
                    item.attempt,
                    name,
                    type(exc).__name__,
                    str(exc)[:300],
                    # The traceback once (the first attempt), not once per retry.
                    exc_info=item.attempt == 1 and not isinstance(exc, PERMANENT),
                )
                failure = f"{type(exc).__name__}: {exc}"[:300]
                outcomes[name] = failure
                failures.append(failure)
                permanent = permanent or isinstance(exc, PERMANENT)
            else:
                outcomes[name] = OK
        if not failures:
            return Finished(item.delivery_id, DeliveryStatus.PROCESSED, None, outcomes)
        return self._failed(item, outcomes, "; ".join(failures), permanent=permanent)

    def _failed(
        self, item: Pending, outcomes: dict[str, str], reason: str, *, permanent: bool
    ) -> Finished:
        if permanent or item.attempt >= self.retry.max_attempts:
            why = "not retryable" if permanent else f"gave up after {item.attempt} attempts"
            log.error("webhook %s (%s) is dead (%s): %s", item.delivery_id, item.event, why, reason)
            return Finished(item.delivery_id, DeliveryStatus.DEAD, f"{why}: {reason}", outcomes)
        wait = self.retry.delay(item.attempt)
        retry_at = self.ctx.clock() + timedelta(seconds=wait)
        log.info(
            "webhook %s (%s): attempt %d of %d failed; next in %.1fs",
            item.delivery_id,
            item.event,
            item.attempt,
            self.retry.max_attempts,
            wait,
        )
        return Finished(item.delivery_id, DeliveryStatus.RETRYING, reason, outcomes, retry_at)

    # -- recovery and retries -------------------------------------------------------------

    async def recover(self, *, grace_seconds: float | None = None) -> int:
        """Process deliveries nobody is processing (see the module docstring); returns how
        many were handled. At start-up `grace_seconds=0` takes every `received` row."""
        grace = self.grace_seconds if grace_seconds is None else grace_seconds
        self._sweeps += 1  # from before its claim: `drain` waits for what it takes
        try:
            return await self._sweep(grace)
        finally:
            self._sweeps -= 1
            self._idle.set()  # `drain` looks again

    async def _sweep(self, grace: float) -> int:
        handled = 0
        while True:
            now = self.ctx.clock()
            rows = await self.db.run(
                claim_stale,
                now=now,
                grace=grace,
                lease=self.lease_seconds,
                limit=BATCH,
                owner=self.owner,
            )
            if not rows:
                self._retries.forget_due(now)  # what is still noted due went elsewhere
                return handled
            self._held.update(row.delivery_id for row in rows)
            batch: list[Pending] = []
            broken: list[Finished] = []
            for row in rows:
                try:
                    batch.append(_pending(row))
                except ValueError:
                    reason = "body is not JSON"
                    broken.append(Finished(row.delivery_id, DeliveryStatus.DEAD, reason))
            await self._record(broken, [])
            await self._record(await self._run(batch), [])
            handled += len(rows)
            log.info("swept %d stored webhook deliveries (retries, lost, taken over)", len(rows))

    async def _sweep_forever(self) -> None:
        first = True
        while True:
            swept = True
            try:
                await self.recover(grace_seconds=0.0 if first else None)
            except Exception:
                log.exception("webhook recovery sweep failed")
                swept = False
            first = False
            await self._sleep_until_next_sweep(retries=swept)

    async def _sleep_until_next_sweep(self, *, retries: bool) -> None:
        """Sleep a sweep interval, or until the earliest retry this process scheduled is
        due; a retry recorded as due sooner wakes it (`_record`). After a failed sweep the
        due retries are still noted: the interval, not a loop of failing sweeps."""
        delay = self.sweep_seconds
        earliest = self._retries.earliest() if retries else None
        if earliest is not None:
            until = (earliest - self.ctx.clock()).total_seconds()
            delay = max(min(until, delay), 0.0)
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)

    async def _heartbeat_forever(self) -> None:
        """Renew this process's claims well within the lease while it holds any."""
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            if not self._held:
                continue
            try:
                statement = renew_statement(
                    self._statuses.dialect, self.owner, sorted(self._held), self.ctx.clock()
                )
                await self._statuses.transaction([statement])
            except Exception:
                log.exception("renewing webhook delivery claims failed")


def _pending(row: Claimed) -> Pending:
    return Pending(row.delivery_id, row.event, payload_of(row.body), row.attempt, row.outcomes)


def payload_of(body: str) -> Any:
    """The payload of a stored body: JSON, or a form whose `payload` field is the JSON (a
    repository hook can be configured to send that; see `webhooks.receiver`)."""
    if body.startswith("payload="):
        body = parse_qs(body).get("payload", [""])[0]
    # orjson.JSONDecodeError is a ValueError.
    return orjson.loads(body)
