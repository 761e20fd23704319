"""Processing new deliveries: claimed and recorded on the processor's own connection, in
arrival order, and a form-encoded delivery is processed after a restart like a JSON one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from gidgethub.routing import Router
from gidgethub.sansio import Event
from sqlalchemy import select

from bot.clock import utcnow
from bot.db import Database
from tests.conftest import GITHUB_DATA, make_settings, store_deliveries
from webhooks.deliveries import DeliveryStatus, NewDelivery, WebhookDelivery
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
        await asyncio.wait_for(processor.drain(), 10)
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
        "garbage": (DeliveryStatus.FAILED, 1),
    }


async def test_a_failing_handler_does_not_stop_the_others_and_the_delivery_says_why(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)
    db = services_factory(settings).db
    await store_deliveries(db, [stored("both")])
    router = Router()
    calls: list[str] = []

    @handles(router, "issues", action="opened")
    async def remember(event: Event, ctx: WebhookContext) -> None:
        raise RuntimeError("memory is down")

    @handles(router, "issues", action="opened")
    async def pickup(event: Event, ctx: WebhookContext) -> None:
        calls.append(event.delivery_id)

    processor = DeliveryProcessor(router, WebhookContext(db=db, settings=settings, clock=utcnow))
    assert await processor.recover(grace_seconds=0) == 1
    assert calls == ["both"]
    assert rows(db) == {"both": (DeliveryStatus.FAILED, 1)}
    reason = db.call(lambda s: s.scalar(select(WebhookDelivery.reason)))
    assert reason == "RuntimeError: memory is down"
