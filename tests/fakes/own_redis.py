"""A Redis of the test's own that can go away and come back with its data (SAVE before the
stop, the same folder and port after), as a restarted or failed-over Redis does: the SSE
streams' Redis-failure tests (tests/test_streams_redis_failure.py, the clients' in
tests/test_client_streams_redis_failure.py and tests/browser/test_gui_events_redis_failure.py),
and a turn's frames held through an outage (tests/test_frame_relay_outage.py, which also has it
come back empty)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from steelframe.embedded_redis import EmbeddedRedis, start_embedded_redis
from steelframe.embedded_redis import PortTaken as EmbeddedPortTaken
from tests.fakes.ports import restartable_port


class PortTaken(RuntimeError):
    """Another process took the port a test's own Redis was to (re)start on."""


def start_redis_at(folder: Path, port: int) -> EmbeddedRedis:
    """An embedded Redis on `port`. The port is fixed (redis-server cannot bind port 0 and
    say which it took, and a restart must come back where its clients point), so another
    process may have taken it since it was picked or since the last stop: that fails here,
    saying so (the embedded Redis checks the server answering is its own), not later as a
    confusing assertion."""
    try:
        return start_embedded_redis(folder, port=port)
    except EmbeddedPortTaken as exc:
        raise PortTaken(
            f"127.0.0.1:{port} was taken by another process before this test's Redis could "
            "(re)start there: a port collision with another test, not a failure of the code"
        ) from exc


@dataclass
class OwnRedis:
    """A Redis that can be stopped and started again on its port with what it held."""

    folder: Path
    port: int
    server: EmbeddedRedis | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.server = start_redis_at(self.folder, self.port)

    def stop_losing_data(self) -> None:
        """Gone with what it held: the next start is empty (a Redis without persistence
        restarted, or a failover to a replica that had not caught up)."""
        assert self.server is not None
        self.server.stop()  # redis-server here runs with `--save ""`: nothing is written
        self.server = None
        (self.folder / "dump.rdb").unlink(missing_ok=True)

    def stop_keeping_data(self) -> None:
        assert self.server is not None
        with redis.Redis.from_url(self.url) as client:
            client.save()  # dump.rdb in `folder`: the next start loads it
        self.server.stop()
        self.server = None


@pytest.fixture(name="own_redis")
def own_redis_fixture(tmp_path: Path) -> Iterator[OwnRedis]:
    """Import it as `own_redis_fixture as own_redis_fixture`: the test gets `own_redis`."""
    own = OwnRedis(tmp_path / "redis", restartable_port())
    own.start()
    yield own
    if own.server is not None:
        own.server.stop()
