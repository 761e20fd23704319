"""`DeliveryProcessor.drain` waits for every delivery this process is still to process:
the queue, the batch in hand, what its recovery sweep claimed, and the retries it scheduled.

The start-up sweep takes every `received` row (no grace). A delivery that arrived while it
ran was claimed by the sweep, so the queue's own claim skipped it and the queue went idle:
`drain` returned with the delivery's handler still running. A test bench settles on `drain`
(tests/fakes/lifecycle.Lifecycle.settle): a pickup processed that way enqueued its job after
the test's burst worker had looked, and the task was found queued, not delivered
(tests/test_lifecycle_ci_fix.py, once, under load).

A handler that failed leaves its delivery `retrying` until its next attempt; `drain` used to
return then, with the delivery still to be processed, and a test asserting on its outcome
raced the retry. Shutdown waits only for retries already due (`drain(retries_within=0)`):
one minutes away stays stored for another instance's sweep or the next start-up's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from gidgethub.routing import Router
from gidgethub.sansio import Event
from sqlalchemy import select

from bot.clock import utcnow
from bot.config import Settings
from bot.config_values import Secret
from bot.db import Database
from steelframe import composition
from tests.conftest import (
    GITHUB_DATA,
    WEBHOOK_SECRET,
    make_settings,
    store_deliveries,
    webhook_headers,
)
from tests.fakes.patience import PATIENCE_SECONDS
from webhooks.deliveries import DeliveryStatus, NewDelivery, WebhookDelivery
from webhooks.delivery_retry import RetryPolicy
from webhooks.deps import WEBHOOKS
from webhooks.processor import SWEEP_SECONDS, DeliveryProcessor
from webhooks.routing import WebhookContext, handles
from webhooks.writer import DeliveryWriter

OPENED = (GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_text()


def stored(delivery_id: str) -> NewDelivery:
    return NewDelivery(
        delivery_id=delivery_id,
        event="issues",
        action="opened",
        installation_id=None,
        repo="Codertocat/Hello-World",
        body=OPENED,
        received_at=utcnow(),
    )


def failing(calls: list[str], *, times: int) -> Router:
    """A handler that fails its first `times` calls, then succeeds."""
    router = Router()

    @handles(router, "issues", action="opened")
    async def flaky(event: Event, ctx: WebhookContext) -> None:
        calls.append(event.delivery_id)
        if len(calls) <= times:
            raise RuntimeError(f"down (call {len(calls)})")

    return router


def row(db: Database, delivery_id: str) -> WebhookDelivery:
    found = db.call(
        lambda s: s.scalar(
            select(WebhookDelivery).where(WebhookDelivery.delivery_id == delivery_id)
        )
    )
    assert isinstance(found, WebhookDelivery)
    return found


async def submitted(processor: DeliveryProcessor, writer: DeliveryWriter, delivery_id: str) -> None:
    """What the receiver does: store the delivery, then queue it."""
    assert await writer.record(stored(delivery_id))
    processor.submit_stored(delivery_id, "issues", OPENED)


async def test_drain_waits_for_a_delivery_the_sweep_is_processing(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)
    db = services_factory(settings).db
    await store_deliveries(db, [stored("late")])
    started, release = asyncio.Event(), asyncio.Event()
    done: list[str] = []
    router = Router()

    @handles(router, "issues", action="opened")
    async def slow(event: Event, ctx: WebhookContext) -> None:
        started.set()
        await release.wait()
        done.append(event.delivery_id)

    processor = DeliveryProcessor(
        router, WebhookContext(db=db, settings=settings, clock=utcnow), sweep_seconds=3600
    )
    processor.start()  # its first sweep claims `late` and waits in the handler
    try:
        await asyncio.wait_for(started.wait(), 60)
        drained = asyncio.create_task(processor.drain())
        # However long it is given, drain does not return while the handler runs.
        done_first, _ = await asyncio.wait({drained}, timeout=1.0)
        assert not done_first, "drain returned while the sweep was processing a delivery"
        release.set()
        await asyncio.wait_for(drained, 60)
        assert done == ["late"]
    finally:
        release.set()
        await processor.close()


@contextlib.asynccontextmanager
async def processing(
    db: Database,
    settings: Settings,
    router: Router,
    *,
    retry: RetryPolicy,
    sweep_seconds: float = SWEEP_SECONDS,
) -> AsyncIterator[tuple[DeliveryProcessor, DeliveryWriter]]:
    """A started processor with its delivery writer, as the service runs them; both closed
    at the end."""
    writer = DeliveryWriter(db)
    processor = DeliveryProcessor(
        router,
        WebhookContext(db=db, settings=settings, clock=utcnow),
        writer=writer,
        sweep_seconds=sweep_seconds,
        retry=retry,
    )
    processor.start()
    try:
        yield processor, writer
    finally:
        await writer.close()
        await processor.close()


async def test_drain_waits_for_the_retry_of_a_handler_that_failed_once(
    services_factory: Callable[..., Any], tmp_path: Path, any_db_url: str
) -> None:
    db = services_factory(settings := make_settings(tmp_path, database_url=any_db_url)).db
    calls: list[str] = []
    async with processing(
        db,
        settings,
        failing(calls, times=1),
        sweep_seconds=3600,  # only the retry's own time wakes the sweep
        retry=RetryPolicy(base_delay=1.0, jitter=0.0),
    ) as (processor, writer):
        await submitted(processor, writer, "flaky")
        await asyncio.wait_for(processor.drain(), PATIENCE_SECONDS)
        # Returned after the retry, not after the failure that scheduled it.
        assert calls == ["flaky", "flaky"]
        done = row(db, "flaky")
        assert (done.status, done.attempts) == (DeliveryStatus.PROCESSED, 2)


async def test_drain_waits_until_the_last_attempt_failed_and_the_delivery_is_dead(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    db = services_factory(settings := make_settings(tmp_path)).db
    calls: list[str] = []
    async with processing(
        db,
        settings,
        failing(calls, times=1_000),
        sweep_seconds=3600,
        retry=RetryPolicy(max_attempts=3, base_delay=0.2, jitter=0.0),
    ) as (processor, writer):
        await submitted(processor, writer, "broken")
        await asyncio.wait_for(processor.drain(), PATIENCE_SECONDS)
        assert calls == ["broken"] * 3
        dead = row(db, "broken")
        assert (dead.status, dead.attempts) == (DeliveryStatus.DEAD, 3)
        assert dead.reason == "gave up after 3 attempts: RuntimeError: down (call 3)"


async def test_drain_within_a_bound_leaves_a_later_retry_stored(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    db = services_factory(settings := make_settings(tmp_path)).db
    calls: list[str] = []
    async with processing(
        db, settings, failing(calls, times=1), retry=RetryPolicy(base_delay=600.0, jitter=0.0)
    ) as (processor, writer):
        await submitted(processor, writer, "later")
        # Due in ten minutes, past the bound: drain returns once the failure is recorded.
        await asyncio.wait_for(processor.drain(retries_within=60.0), PATIENCE_SECONDS)
        waiting = row(db, "later")
        assert calls == ["later"]
        assert (waiting.status, waiting.attempts) == (DeliveryStatus.RETRYING, 1)
        assert waiting.next_attempt_at is not None
        assert waiting.next_attempt_at - waiting.received_at > timedelta(minutes=9)


async def test_drain_stops_waiting_for_a_retry_another_instance_took(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """The retry is this process's to wait for only while nobody else takes it: at its due
    time the sweep finds it gone (processed elsewhere) and drain returns."""
    db = services_factory(settings := make_settings(tmp_path)).db
    calls: list[str] = []
    router = failing(calls, times=1)
    # Another instance, whose clock finds the retry due at once.
    later = WebhookContext(db=db, settings=settings, clock=lambda: utcnow() + timedelta(hours=1))
    elsewhere = DeliveryProcessor(router, later)
    try:
        async with processing(
            db, settings, router, sweep_seconds=3600, retry=RetryPolicy(base_delay=3.0, jitter=0.0)
        ) as (here, writer):
            await submitted(here, writer, "moved")
            await asyncio.wait_for(here.drain(retries_within=0.0), PATIENCE_SECONDS)
            assert calls == ["moved"]
            assert await elsewhere.recover() == 1
            assert calls == ["moved", "moved"]
            await asyncio.wait_for(here.drain(), PATIENCE_SECONDS)
            assert row(db, "moved").status == DeliveryStatus.PROCESSED
    finally:
        await elsewhere.close()


async def test_shutdown_does_not_wait_for_a_retry_minutes_away(
    api_factory: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exit waits for the work in hand, not for a retry that is stored anyway (another
    instance's sweep, or this one's next start-up, takes it when it is due)."""
    # Only drain's own contract can end the wait, not the shutdown's time limit.
    monkeypatch.setattr(composition, "SHUTDOWN_DRAIN_SECONDS", 10 * PATIENCE_SECONDS)
    api = await api_factory(make_settings(tmp_path, webhook_secret=Secret(WEBHOOK_SECRET)))
    processor = api.raw.app[WEBHOOKS].processor
    calls: list[str] = []
    processor.router = failing(calls, times=1)
    processor.retry = RetryPolicy(base_delay=600.0, jitter=0.0)
    body = OPENED.encode()
    headers = webhook_headers(body, "issues", delivery="stays")
    assert (await api.raw.post("/api/github/webhooks", data=body, headers=headers)).status == 202
    await asyncio.wait_for(processor.drain(retries_within=0.0), PATIENCE_SECONDS)
    assert row(api.services.db, "stays").status == DeliveryStatus.RETRYING
    await asyncio.wait_for(api.raw.close(), PATIENCE_SECONDS)
    assert calls == ["stays"]
