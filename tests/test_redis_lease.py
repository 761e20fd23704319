"""One holder at a time across processes (a Redis lease), and one reconciler at a time
across workers."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot import db as dbmod
from bot.lifecycle.reconcile import reconcile_if_leader, reconciler_lease_name
from bot.redis_lease import RedisLease, held
from steelframe.cli import main
from steelframe.worker_context import build_worker_context
from tests.conftest import make_settings
from tests.fakes.patience import PATIENCE_SECONDS


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


def wait_until(predicate: object, *, within: float = PATIENCE_SECONDS) -> None:
    deadline = time.monotonic() + within
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_one_holder_at_a_time_and_release_hands_it_on(client: redis.Redis) -> None:
    first = RedisLease(client, "test:lease", ttl=30)
    second = RedisLease(client, "test:lease", ttl=30)
    assert first.acquire() and not second.acquire()
    assert not second.renew()  # only the holder renews...
    second.release()  # ...or releases
    assert first.holder() == first.token
    first.release()
    assert second.acquire() and second.holder() == second.token


def test_a_holder_that_stops_renewing_loses_the_lease_after_its_ttl(client: redis.Redis) -> None:
    crashed = RedisLease(client, "test:lapse", ttl=0.5)
    assert crashed.acquire()
    successor = RedisLease(client, "test:lapse", ttl=30)
    wait_until(successor.acquire)
    assert not crashed.renew()


def test_held_renews_while_the_work_lasts(client: redis.Redis) -> None:
    with held(client, "test:held", ttl=3.0) as leader:
        assert leader
        # The renewer puts the expiry back to the full ttl every second: seen as the time
        # left going up again after it went down.
        wait_until(lambda: int(client.pttl("test:held")) < 2800)
        low = int(client.pttl("test:held"))
        wait_until(lambda: int(client.pttl("test:held")) > low + 100)
        with held(client, "test:held", ttl=3.0) as other:
            assert not other
    assert client.get("test:held") is None  # released at the end


def test_a_worker_skips_reconciling_while_another_holds_the_lease(
    client: redis.Redis, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path, redis_url=redis_url)
    ctx = build_worker_context(settings, environ=os.environ, connection=client, memory=False)
    dbmod.upgrade(ctx.db.engine)
    said: list[str] = []
    with held(client, reconciler_lease_name(ctx.queue_name), ttl=30) as leader:
        assert leader
        assert reconcile_if_leader(ctx, say=said.append) is None
        assert said == []  # it did not start
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("STEELFRAME_DATABASE_URL", settings.database_url)
        monkeypatch.setenv("STEELFRAME_REDIS_URL", redis_url)
        assert main(["reconcile"]) == 1
    report = reconcile_if_leader(ctx, say=said.append)
    assert report is not None and not report.errors and said
    ctx.db.dispose()
