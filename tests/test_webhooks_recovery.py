"""Deliveries stored but not processed (a crash, a restart) are processed later, once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event
from sqlalchemy import select

from bot.clock import utcnow
from bot.config import Secret
from bot.db import Database
from tests.conftest import GITHUB_DATA, WEBHOOK_SECRET, make_settings, store_deliveries
from webhooks.deliveries import (
    DeliveryStatus,
    NewDelivery,
    WebhookDelivery,
    claim,
    claim_stale,
    requeue,
)
from webhooks.processor import DeliveryProcessor
from webhooks.router import build_router
from webhooks.routing import WebhookContext, handles

OPENED = (GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_text()


def stored(delivery_id: str, *, at: datetime | None = None) -> NewDelivery:
    return NewDelivery(
        delivery_id=delivery_id,
        event="issues",
        action="opened",
        installation_id=None,
        repo="Codertocat/Hello-World",
        body=OPENED,
        received_at=at or utcnow(),
    )


def statuses(db: Database) -> dict[str, str]:
    return db.call(lambda s: {d.delivery_id: d.status for d in s.scalars(select(WebhookDelivery))})


def counting(calls: list[str]) -> Router:
    router = Router()

    @handles(router, "issues", action="opened")
    async def count_it(event: Event, ctx: WebhookContext) -> None:
        calls.append(event.delivery_id)
        await asyncio.sleep(0)  # let the other processor interleave

    return router


async def test_deliveries_left_unprocessed_are_processed_when_the_service_starts(
    api_factory: Callable[..., Any],
    services_factory: Callable[..., Any],
    tmp_path: Path,
    any_db_url: str,
) -> None:
    settings = make_settings(
        tmp_path, database_url=any_db_url, webhook_secret=Secret(WEBHOOK_SECRET)
    )
    before = services_factory(settings)  # a previous run: stored, acknowledged, then killed
    await store_deliveries(before.db, [stored("a"), stored("b"), stored("c")])
    before.db.call(claim, ["c"], now=utcnow())  # c is being processed by a live process
    api = await api_factory(settings)
    deadline = time.monotonic() + 10
    while statuses(api.services.db)["b"] != DeliveryStatus.PROCESSED:
        assert time.monotonic() < deadline, statuses(api.services.db)
        await asyncio.sleep(0.02)
    assert statuses(api.services.db) == {
        "a": DeliveryStatus.PROCESSED,
        "b": DeliveryStatus.PROCESSED,
        "c": DeliveryStatus.PROCESSING,  # within its lease: not taken from its owner
    }


async def test_processing_past_its_lease_is_taken_again(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    db = services_factory(make_settings(tmp_path)).db
    start = datetime(2025, 1, 1, tzinfo=UTC)
    await store_deliveries(db, [stored("old", at=start), stored("new", at=start)])
    db.call(claim, ["old", "new"], now=start)
    later = start + timedelta(seconds=601)
    assert db.call(claim_stale, now=later, grace=30, lease=600, limit=10) == [
        ("new", "issues", OPENED),
        ("old", "issues", OPENED),
    ]
    # Claimed again just now: within the lease, nobody takes them.
    assert db.call(claim_stale, now=later, grace=30, lease=600, limit=10) == []


async def test_received_rows_wait_out_the_grace_period(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    db = services_factory(make_settings(tmp_path)).db
    now = utcnow()
    await store_deliveries(db, [stored("fresh", at=now)])
    assert db.call(claim_stale, now=now, grace=30, lease=600, limit=10) == []
    taken = db.call(claim_stale, now=now + timedelta(seconds=31), grace=30, lease=600, limit=10)
    assert [row[0] for row in taken] == ["fresh"]


async def test_two_processes_recovering_at_once_process_each_delivery_once(
    services_factory: Callable[..., Any], tmp_path: Path, any_db_url: str
) -> None:
    settings = make_settings(tmp_path, database_url=any_db_url)
    db = services_factory(settings).db
    await store_deliveries(db, [stored(f"d{n:02}") for n in range(40)])
    calls: list[str] = []
    ctx = WebhookContext(db=db, settings=settings, clock=utcnow)
    one = DeliveryProcessor(build_router(counting(calls)), ctx)
    two = DeliveryProcessor(build_router(counting(calls)), ctx)
    handled = await asyncio.gather(one.recover(grace_seconds=0), two.recover(grace_seconds=0))
    assert sum(handled) == 40
    assert sorted(calls) == [f"d{n:02}" for n in range(40)]
    assert set(statuses(db).values()) == {DeliveryStatus.PROCESSED}


async def test_a_failed_delivery_requeued_by_the_operator_is_processed_again(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)
    db = services_factory(settings).db
    await store_deliveries(db, [stored("broken")])
    attempts: list[str] = []
    router = Router()

    @handles(router, "issues", action="opened")
    async def flaky(event: Event, ctx: WebhookContext) -> None:
        attempts.append(event.delivery_id)
        if len(attempts) == 1:
            raise ConnectionError("database went away")

    processor = DeliveryProcessor(router, WebhookContext(db=db, settings=settings, clock=utcnow))
    await processor.recover(grace_seconds=0)
    assert statuses(db) == {"broken": DeliveryStatus.FAILED}
    assert db.call(requeue, "broken") is True
    await processor.recover(grace_seconds=0)
    assert statuses(db) == {"broken": DeliveryStatus.PROCESSED} and len(attempts) == 2
    assert db.call(requeue, "never-seen") is False
