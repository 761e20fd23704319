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
from sqlalchemy import select, update

from bot.clock import utcnow
from bot.config_values import Secret
from bot.db import Database
from memory import ChunkIn, add_chunk
from memory.models import MemoryChunk
from tests.conftest import GITHUB_DATA, WEBHOOK_SECRET, make_settings, store_deliveries
from tests.fakes.patience import PATIENCE_SECONDS
from webhooks.chunks import Write
from webhooks.deliveries import DeliveryStatus, NewDelivery, WebhookDelivery
from webhooks.delivery_log import Replay, requeue
from webhooks.delivery_retry import RetryPolicy
from webhooks.delivery_sql import claim, claim_stale
from webhooks.handlers.common import commit
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
    before.db.call(claim, ["c"], now=utcnow(), owner="alive")  # a live process has c
    api = await api_factory(settings)
    # Not PATIENCE_SECONDS: c must still be within its 15 s lease (LEASE_SECONDS, from the
    # claim above) when the statuses are read, or a sweep takes it.
    deadline = time.monotonic() + 10
    while statuses(api.services.db)["b"] != DeliveryStatus.PROCESSED:
        assert time.monotonic() < deadline, statuses(api.services.db)
        await asyncio.sleep(0.02)
    assert statuses(api.services.db) == {
        "a": DeliveryStatus.PROCESSED,
        "b": DeliveryStatus.PROCESSED,
        "c": DeliveryStatus.PROCESSING,  # within its lease: not taken from its owner
    }


async def test_a_claim_not_renewed_within_its_lease_is_taken_over(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    db = services_factory(make_settings(tmp_path)).db
    start = datetime(2025, 1, 1, tzinfo=UTC)
    await store_deliveries(db, [stored("old", at=start), stored("new", at=start)])
    db.call(claim, ["old", "new"], now=start, owner="dead")
    later = start + timedelta(seconds=16)
    taken = db.call(claim_stale, now=later, grace=30, lease=15, limit=10, owner="next")
    assert [(row.delivery_id, row.attempt) for row in taken] == [("new", 2), ("old", 2)]
    # Claimed again just now: within the lease, nobody takes them.
    assert db.call(claim_stale, now=later, grace=30, lease=15, limit=10, owner="third") == []


async def test_a_renewed_claim_is_not_taken_over(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    db = services_factory(make_settings(tmp_path)).db
    start = datetime(2025, 1, 1, tzinfo=UTC)
    await store_deliveries(db, [stored("kept", at=start)])
    db.call(claim, ["kept"], now=start, owner="alive")
    renewed = start + timedelta(seconds=10)

    def renew(session: Any) -> None:
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.claimed_by == "alive")
            .values(claimed_at=renewed)
        )

    db.call(renew)
    later = start + timedelta(seconds=20)  # past the first claim's lease, not the renewal's
    assert db.call(claim_stale, now=later, grace=30, lease=15, limit=10, owner="other") == []


async def test_received_rows_wait_out_the_grace_period(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    db = services_factory(make_settings(tmp_path)).db
    now = utcnow()
    await store_deliveries(db, [stored("fresh", at=now)])
    assert db.call(claim_stale, now=now, grace=30, lease=15, limit=10, owner="me") == []
    later = now + timedelta(seconds=31)
    taken = db.call(claim_stale, now=later, grace=30, lease=15, limit=10, owner="me")
    assert [row.delivery_id for row in taken] == ["fresh"]


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


async def test_a_dead_delivery_replayed_by_the_operator_is_processed_again(
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

    processor = DeliveryProcessor(
        router,
        WebhookContext(db=db, settings=settings, clock=utcnow),
        retry=RetryPolicy(max_attempts=1),
    )
    await processor.recover(grace_seconds=0)
    assert statuses(db) == {"broken": DeliveryStatus.DEAD}
    assert db.call(requeue, "broken") is Replay.QUEUED
    await processor.recover(grace_seconds=0)
    assert statuses(db) == {"broken": DeliveryStatus.PROCESSED} and len(attempts) == 2
    assert db.call(requeue, "never-seen") is Replay.UNKNOWN


async def test_a_live_owner_keeps_its_claim_by_heartbeat_and_a_dead_ones_is_taken_over(
    services_factory: Callable[..., Any], tmp_path: Path, any_db_url: str
) -> None:
    settings = make_settings(tmp_path, database_url=any_db_url)
    db = services_factory(settings).db
    now = [datetime(2025, 1, 1, tzinfo=UTC)]
    await store_deliveries(db, [stored("slow", at=now[0])])
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[str] = []
    router = Router()

    @handles(router, "issues", action="opened")
    async def slow(event: Event, ctx: WebhookContext) -> None:
        runs.append(event.delivery_id)
        started.set()
        await release.wait()

    ctx = WebhookContext(db=db, settings=settings, clock=lambda: now[0])
    owner = DeliveryProcessor(router, ctx, lease_seconds=0.3, sweep_seconds=3600)
    owner.start()  # its first sweep claims `slow` and blocks in the handler
    await asyncio.wait_for(started.wait(), PATIENCE_SECONDS)

    def claimed_at() -> datetime | None:
        return db.call(lambda s: s.get(WebhookDelivery, "slow").claimed_at)

    # Far past the first claim's lease: the owner's heartbeat has renewed it meanwhile.
    now[0] += timedelta(seconds=60)
    deadline = time.monotonic() + PATIENCE_SECONDS
    while claimed_at() != now[0]:
        assert time.monotonic() < deadline, "the heartbeat did not renew the claim"
        await asyncio.sleep(0.05)
    other = DeliveryProcessor(router, ctx, lease_seconds=0.3)
    assert await other.recover() == 0  # a live owner's claim is not taken
    # The owner dies (no drain, no outcome): once its lease lapses, the other takes over.
    for task in owner._tasks:
        task.cancel()
    await asyncio.gather(*owner._tasks, return_exceptions=True)
    now[0] += timedelta(seconds=1)
    release.set()
    assert await other.recover() == 1
    assert runs == ["slow", "slow"] and statuses(db) == {"slow": DeliveryStatus.PROCESSED}
    await owner.close()
    await other.close()


async def test_a_delivery_whose_processing_keeps_being_cut_short_becomes_dead(
    services_factory: Callable[..., Any], tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)
    db = services_factory(settings).db
    start = datetime(2025, 1, 1, tzinfo=UTC)
    await store_deliveries(db, [stored("poison", at=start)])

    def crashed_eight_times(session: Any) -> None:
        row = session.get(WebhookDelivery, "poison")
        row.status, row.attempts, row.claimed_at = DeliveryStatus.PROCESSING, 8, start

    db.call(crashed_eight_times)
    calls: list[str] = []
    later = start + timedelta(minutes=1)
    ctx = WebhookContext(db=db, settings=settings, clock=lambda: later)
    processor = DeliveryProcessor(counting(calls), ctx, retry=RetryPolicy(max_attempts=8))
    assert await processor.recover() == 1
    assert calls == []  # not fed to a ninth process
    row = db.call(lambda s: s.get(WebhookDelivery, "poison"))
    assert row.status == DeliveryStatus.DEAD and row.reason == "processing was interrupted 8 times"


async def test_a_handler_whose_effect_committed_before_its_process_died_is_not_run_again(
    services_factory: Callable[..., Any], tmp_path: Path, any_db_url: str
) -> None:
    settings = make_settings(tmp_path, database_url=any_db_url)
    db = services_factory(settings).db
    await store_deliveries(db, [stored("x")])
    runs: list[str] = []
    committed = asyncio.Event()
    router = Router()

    @handles(router, "issues", action="opened")
    async def remembers(event: Event, ctx: WebhookContext) -> None:
        runs.append(event.delivery_id)
        text = f"run {len(runs)}"
        await commit(ctx, [Write(lambda s: add_chunk(s, ChunkIn(text, "issue", "o/r", key="k")))])
        if len(runs) == 1:
            committed.set()
            await asyncio.Event().wait()  # dies here: effect committed, outcome not recorded

    now = [utcnow()]
    ctx = WebhookContext(db=db, settings=settings, clock=lambda: now[0])
    owner = DeliveryProcessor(router, ctx, lease_seconds=0.3, sweep_seconds=3600)
    owner.start()
    await asyncio.wait_for(committed.wait(), PATIENCE_SECONDS)
    for task in owner._tasks:  # the process dies: no drain, no outcome, no renewal
        task.cancel()
    await asyncio.gather(*owner._tasks, return_exceptions=True)
    now[0] += timedelta(seconds=60)
    other = DeliveryProcessor(router, ctx, lease_seconds=0.3)
    assert await other.recover() == 1  # taken over...
    assert runs == ["x"]  # ...and not run again
    assert statuses(db) == {"x": DeliveryStatus.PROCESSED}
    texts = db.call(lambda s: list(s.scalars(select(MemoryChunk.text))))
    assert texts == ["run 1"]
    # An operator's replay of a processed delivery runs every handler again.
    assert db.call(requeue, "x") is Replay.QUEUED
    assert await other.recover(grace_seconds=0) == 1
    assert runs == ["x", "x"] and statuses(db) == {"x": DeliveryStatus.PROCESSED}
