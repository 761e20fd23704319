"""An uninstall handled by one process reaches every process's installation cache: the
handler appends the repositories to a Redis stream, and each process's lookup forgets them
before its next answer (bot.github.installation_removals). Real Redis, the GitHub sandbox
and the service's webhook handler; the "other processes" are lookups as their clients hold
them, sharing that Redis."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time

import pytest
import redis

from bot.github.client import GitHubClient
from bot.github.errors import GitHubNotFound
from bot.github.installation_removals import (
    REMOVALS_RETRY_SECONDS,
    InstallationRemovals,
    SharedInstallationLookup,
)
from tests.fakes.installations import other_processes
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def test_an_uninstall_handled_by_one_process_reaches_the_others_caches(make: Make) -> None:
    lc = await make()
    sandbox = lc.sandbox.sandbox
    installation = sandbox.world.installations[lc.sandbox.installation_id]
    # Another serve process and a worker, each with its answer cached.
    with other_processes(lc) as others:
        for lookup in others:
            assert await lookup.get(lc.repo) == installation.id
        sandbox.uninstall(installation)
        await lc.settle()  # this process's handler of `installation.deleted`
        for lookup in others:
            # Asked again, GitHub answers that the App is not installed there any more.
            with pytest.raises(GitHubNotFound):
                await lookup.get(lc.repo)


async def test_a_lookup_reads_only_removals_made_after_it_started(redis_url: str) -> None:
    """Two caches sharing one Redis: a removal told before a cache started concerns nothing
    it holds; one told after is forgotten once, and then answered afresh and kept."""
    connection = redis.Redis.from_url(redis_url)
    removals = InstallationRemovals(connection, app_id=1)
    asked: list[str] = []

    async def fetch(repo: str) -> int:
        asked.append(repo)
        return 7

    removals.removed(["octo/old"], 3)
    first = SharedInstallationLookup(fetch, removals=removals, clock=time.time)
    second = SharedInstallationLookup(fetch, removals=removals, clock=time.time)
    for lookup in (first, second):
        assert await lookup.get("octo/old") == 7 and await lookup.get("Octo/Repo") == 7
    assert len(asked) == 4
    removals.removed(["octo/repo"], 7)
    for lookup in (first, second):
        assert await lookup.get("octo/repo") == 7  # asked again
        assert await lookup.get("octo/repo") == 7 and await lookup.get("octo/old") == 7
    assert asked[4:] == ["octo/repo", "octo/repo"]
    connection.close()


async def test_every_client_built_from_settings_forgets_a_removed_installation(
    make: Make,
) -> None:
    """What each serve and worker process builds (`GitHubClient.from_settings`, with Redis
    configured) reads the removals the uninstall handler appends."""
    lc = await make()
    sandbox = lc.sandbox.sandbox
    installation = sandbox.world.installations[lc.sandbox.installation_id]
    clients = [GitHubClient.from_settings(lc.settings) for _ in range(2)]
    for client in clients:
        assert await client.installation_id(lc.repo) == installation.id
    sandbox.uninstall(installation)
    await lc.settle()
    for client in clients:
        with pytest.raises(GitHubNotFound):
            await client.installation_id(lc.repo)
        await client.close()


class ClosingServer:
    """A Redis that accepts each connection and closes it at once (a proxy whose Redis is
    gone): every command fails with a ConnectionError; `accepted` counts the attempts."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self.listener.accept()
                self.accepted += 1
                connection.close()

    def close(self) -> None:
        self.listener.close()


async def test_an_unreachable_redis_is_tried_once_a_window_and_nothing_told_is_missed(
    redis_url: str,
) -> None:
    """Redis failing costs one attempt per REMOVALS_RETRY_SECONDS, not one per GitHub call;
    a removal told meanwhile is read once Redis answers again."""
    app_id = random.randrange(10**6, 10**7)
    healthy = redis.Redis.from_url(redis_url)
    removals = InstallationRemovals(healthy, app_id=app_id)
    now = [1_000.0]
    asked: list[str] = []

    async def fetch(repo: str) -> int:
        asked.append(repo)
        return 7

    lookup = SharedInstallationLookup(fetch, removals=removals, clock=lambda: now[0])
    assert await lookup.get("octo/repo") == 7  # cached, the stream's position read
    broken = ClosingServer()
    removals.connection = redis.Redis(host="127.0.0.1", port=broken.port)
    try:
        assert await lookup.get("octo/repo") == 7
        tried = broken.accepted
        assert tried >= 1
        InstallationRemovals(healthy, app_id=app_id).removed(["octo/repo"], 7)
        for _ in range(20):  # answered from the cache, Redis not tried again
            assert await lookup.get("octo/repo") == 7
        assert broken.accepted == tried and asked == ["octo/repo"]
        now[0] += REMOVALS_RETRY_SECONDS + 1
        assert await lookup.get("octo/repo") == 7
        assert broken.accepted > tried  # tried again once the window passed
    finally:
        removals.connection.close()
        broken.close()
    removals.connection = healthy  # Redis is back
    now[0] += REMOVALS_RETRY_SECONDS + 1
    assert await lookup.get("octo/repo") == 7
    assert asked == ["octo/repo", "octo/repo"]  # the removal told meanwhile was read
    healthy.close()


async def test_removals_told_while_redis_was_down_from_the_start_are_read_once_it_answers(
    redis_url: str,
) -> None:
    """A process whose very first read fails has no position in the stream yet: what is told
    during that outage still reaches the answers it cached meanwhile."""
    app_id = random.randrange(10**6, 10**7)
    healthy = redis.Redis.from_url(redis_url)
    broken = ClosingServer()
    removals = InstallationRemovals(redis.Redis(host="127.0.0.1", port=broken.port), app_id=app_id)
    later = [0.0]
    asked: list[str] = []

    async def fetch(repo: str) -> int:
        asked.append(repo)
        return 7

    # The real time: stream entry ids are Redis's clock.
    lookup = SharedInstallationLookup(
        fetch, removals=removals, clock=lambda: time.time() + later[0]
    )
    try:
        assert await lookup.get("octo/repo") == 7  # the first read failed; the answer cached
        assert broken.accepted >= 1
        InstallationRemovals(healthy, app_id=app_id).removed(["octo/repo"], 7)
    finally:
        removals.connection.close()
        broken.close()
    removals.connection = healthy  # Redis is back
    later[0] = REMOVALS_RETRY_SECONDS + 1
    assert await lookup.get("octo/repo") == 7
    assert asked == ["octo/repo", "octo/repo"]  # the removal told during the outage was read
    assert await lookup.get("octo/repo") == 7 and len(asked) == 2  # and read once
    healthy.close()
