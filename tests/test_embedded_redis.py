"""`steelframe dev`'s embedded Redis is its own: a port another Redis holds is not taken for
a start (its child exits, the other server would answer the ping and `dev` would share that
server's data), and a free port taken between its probe and the child's bind is tried again
elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from steelframe import embedded_redis
from steelframe.embedded_redis import EmbeddedRedis, PortTaken, start_embedded_redis


def _port(server: EmbeddedRedis) -> int:
    return int(server.url.rsplit(":", 1)[1].split("/")[0])


@pytest.fixture(name="another_redis")
def another_redis_fixture(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = start_embedded_redis(tmp_path / "another")
    with redis.Redis.from_url(server.url) as client:
        client.set("whose", "another's")
    yield server
    server.stop()


def test_a_port_another_redis_holds_is_refused_by_name(
    tmp_path: Path, another_redis: EmbeddedRedis
) -> None:
    port = _port(another_redis)
    with pytest.raises(PortTaken, match=f"127.0.0.1:{port} is taken"):
        start_embedded_redis(tmp_path / "ours", port=port)
    with redis.Redis.from_url(another_redis.url) as client:  # the other one is untouched
        assert client.get("whose") == b"another's"


def test_a_free_port_taken_before_the_bind_is_tried_again_elsewhere(
    tmp_path: Path, another_redis: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken, free = _port(another_redis), embedded_redis._free_port
    probes = iter([taken])
    monkeypatch.setattr(embedded_redis, "_free_port", lambda: next(probes, None) or free())
    ours = start_embedded_redis(tmp_path / "ours")
    try:
        assert _port(ours) != taken
        with redis.Redis.from_url(ours.url) as client:
            assert client.get("whose") is None
    finally:
        ours.stop()
