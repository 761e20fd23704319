"""`DeliveryProcessor.drain` waits for the deliveries its recovery sweep is processing too.

The start-up sweep takes every `received` row (no grace). A delivery that arrived while it
ran was claimed by the sweep, so the queue's own claim skipped it and the queue went idle:
`drain` returned with the delivery's handler still running. A test bench settles on `drain`
(tests/fakes/lifecycle.Lifecycle.settle): a pickup processed that way enqueued its job after
the test's burst worker had looked, and the task was found queued, not delivered
(tests/test_lifecycle_ci_fix.py, once, under load)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event

from bot.clock import utcnow
from tests.conftest import GITHUB_DATA, make_settings, store_deliveries
from webhooks.deliveries import NewDelivery
from webhooks.processor import DeliveryProcessor
from webhooks.routing import WebhookContext, handles

OPENED = (GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_text()


async def test_drain_waits_for_a_delivery_the_sweep_is_processing(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)
    db = services_factory(settings).db
    delivery = NewDelivery(
        delivery_id="late",
        event="issues",
        action="opened",
        installation_id=None,
        repo="Codertocat/Hello-World",
        body=OPENED,
        received_at=utcnow(),
    )
    await store_deliveries(db, [delivery])
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
