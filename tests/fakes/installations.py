"""Other processes' installation lookups, for tests of how an uninstall or a suspension
handled in one process reaches the caches of the others (bot.github.installation_removals)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from bot.github.installation_removals import InstallationRemovals, SharedInstallationLookup
from tests.conftest import SANDBOX_APP_ID
from tests.fakes.lifecycle import Lifecycle


@contextmanager
def other_processes(lc: Lifecycle, count: int = 2) -> Iterator[list[SharedInstallationLookup]]:
    """`count` lookups as other serve or worker processes hold them: each asks GitHub
    through a client of its own (`GET /repos/{repo}/installation`) and caches the answer for
    an hour, reading the removals stream on the test's Redis before each answer."""
    connection = redis.Redis.from_url(lc.settings.redis_url or "")
    try:
        yield [
            SharedInstallationLookup(
                lc.sandbox.client()._fetch_installation,
                removals=InstallationRemovals(connection, app_id=SANDBOX_APP_ID),
                clock=time.time,
            )
            for _ in range(count)
        ]
    finally:
        connection.close()
