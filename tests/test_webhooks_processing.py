"""Processing new deliveries: claimed and recorded on the processor's own connection, in
arrival order, and a form-encoded delivery is processed after a restart like a JSON one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from gidgethub.routing import Router
from gidgethub.sansio import Event
from sqlalchemy import select

from bot.clock import utcnow
from bot.db import Database
from tests.conftest import GITHUB_DATA, make_settings, store_deliveries
from tests.fakes.patience import PATIENCE_SECONDS
from webhooks.deliveries import DeliveryStatus, NewDelivery, WebhookDelivery
from webhooks.delivery_retry import RetryPolicy
from webhooks.processor import DeliveryProcessor
from webhooks.routing import WebhookContext, handles
from webhooks.writer import DeliveryWriter

OPENED = (GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_text()


def stored(delivery_id: str, body: str = OPENED) -> NewDelivery:
    return NewDelivery(
        delivery_id=delivery_id,
        event="issues",
        action="opened",
        installation_id=None,
        repo="Codertocat/Hello-World",
        body=body,
        received_at=utcnow(),
    )


def rows(db: Database) -> dict[str, tuple[str, int]]:
    return db.call(
        lambda s: {
            d.delivery_id: (d.status, d.attempts) for d in s.scalars(select(WebhookDelivery))
        }
    )


def recording(calls: list[str]) -> Router:
    router = Router()

    @handles(router, "issues", action="opened", needs={"issue.number": int})
    async def record(event: Event, ctx: WebhookContext) -> None:
        calls.append(event.delivery_id)

    return router


async def test_new_deliveries_are_processed_once_in_arrival_order(
    services_factory: Callable[..., Any], tmp_path: Path, any_db_url: str
) -> None:
    settings = make_settings(tmp_path, database_url=any_db_url)
    db = services_factory(settings).db
    writer = DeliveryWriter(db)
    calls: list[str] = []
    ctx = WebhookContext(db=db, settings=settings, clock=utcnow)
    processor = DeliveryProcessor(recording(calls), ctx, writer=writer)
    processor.start()
    ids = [f"d{n:03}" for n in range(120)]
    try:
        stored_now = await asyncio.gather(*(writer.record(stored(i)) for i in ids))
        assert all(stored_now)
        data = json.loads(OPENED)
        for delivery_id in ids:
            processor.submit(delivery_id, "issues", data)
        processor.submit(ids[0], "issues", data)  # a second copy: already claimed, skipped
        await asyncio.wait_for(processor.drain(), PATIENCE_SECONDS)
    finally:
        await writer.close()
        await processor.close()
    assert calls == ids
    assert rows(db) == {i: (DeliveryStatus.PROCESSED, 1) for i in ids}


async def test_a_stored_form_encoded_delivery_is_processed_after_a_restart(
    services_factory: Callable[..., Any], tmp_path: Path, any_db_url: str
) -> None:
    settings = make_settings(tmp_path, database_url=any_db_url)
    db = services_factory(settings).db
    await store_deliveries(
        db, [stored("form", urlencode({"payload": OPENED})), stored("garbage", "payload=%7Bnot")]
    )
    calls: list[str] = []
    processor = DeliveryProcessor(
        recording(calls), WebhookContext(db=db, settings=settings, clock=utcnow)
    )
    assert await processor.recover(grace_seconds=0) == 2
    assert calls == ["form"]
    assert rows(db) == {
        "form": (DeliveryStatus.PROCESSED, 1),
        "garbage": (DeliveryStatus.DEAD, 1),
    }


async def test_a_failing_handler_does_not_stop_the_others_and_only_it_is_retried(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)
    db = services_factory(settings).db
    await store_deliveries(db, [stored("both")])
    router = Router()
    remembered: list[str] = []
    picked: list[str] = []

    @handles(router, "issues", action="opened")
    async def remember(event: Event, ctx: WebhookContext) -> None:
        remembered.append(event.delivery_id)
        if len(remembered) == 1:
            raise RuntimeError("memory is down")

    @handles(router, "issues", action="opened")
    async def pickup(event: Event, ctx: WebhookContext) -> None:
        picked.append(event.delivery_id)

    now = [utcnow()]
    processor = DeliveryProcessor(
        router,
        WebhookContext(db=db, settings=settings, clock=lambda: now[0]),
        retry=RetryPolicy(base_delay=60.0, jitter=0.0),
    )
    assert await processor.recover(grace_seconds=0) == 1
    assert picked == ["both"] and remembered == ["both"]
    assert rows(db) == {"both": (DeliveryStatus.RETRYING, 1)}
    reason = db.call(lambda s: s.scalar(select(WebhookDelivery.reason)))
    assert reason == "RuntimeError: memory is down"
    assert await processor.recover(grace_seconds=0) == 0  # not due yet
    now[0] += timedelta(seconds=61)
    # Due now: only the handler that failed runs again.
    assert await processor.recover(grace_seconds=0) == 1
    assert picked == ["both"] and remembered == ["both", "both"]
    assert rows(db) == {"both": (DeliveryStatus.PROCESSED, 2)}
    outcomes = json.loads(db.call(lambda s: s.scalar(select(WebhookDelivery.outcomes))))
    assert set(outcomes.values()) == {"ok"} and len(outcomes) == 2


def test_retry_delays_grow_exponentially_with_jitter_up_to_a_cap() -> None:
    policy = RetryPolicy(base_delay=5.0, max_delay=600.0, jitter=0.5)
    assert [policy.delay(n, rng=lambda: 0.0) for n in range(1, 9)] == [
        5.0,
        10.0,
        20.0,
        40.0,
        80.0,
        160.0,
        320.0,
        600.0,
    ]
    assert policy.delay(3, rng=lambda: 1.0) == 10.0  # at most half taken off
    spread = {round(policy.delay(2), 3) for _ in range(50)}
    assert len(spread) > 1 and all(5.0 <= d <= 10.0 for d in spread)


async def test_a_long_queue_reads_texts_back_and_past_its_end_waits_in_the_log_processed_once(
    services_factory: Callable[..., Any], tmp_path: Path, any_db_url: str
) -> None:
    settings = make_settings(tmp_path, database_url=any_db_url)
    db = services_factory(settings).db
    writer = DeliveryWriter(db)
    calls: list[str] = []
    ctx = WebhookContext(db=db, settings=settings, clock=utcnow)
    processor = DeliveryProcessor(
        recording(calls), ctx, writer=writer, max_queued=20, max_queued_texts=5
    )
    # Only the queue's consumer: the start-up sweep would take every stored row itself.
    processor._tasks = [asyncio.create_task(processor._consume())]
    ids = [f"d{n:03}" for n in range(40)]
    try:
        assert all(await asyncio.gather(*(writer.record(stored(i)) for i in ids)))
        for delivery_id in ids:
            processor.submit_stored(delivery_id, "issues", OPENED)
        await asyncio.wait_for(processor.drain(), PATIENCE_SECONDS)
    finally:
        await writer.close()
        await processor.close()
    # The 5 queued with their text and the 15 queued by id in arrival order, then the 20
    # the queue had no room for, from the log; each once.
    assert calls[:20] == ids[:20] and sorted(calls) == ids
    assert rows(db) == {i: (DeliveryStatus.PROCESSED, 1) for i in ids}
