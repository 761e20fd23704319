"""`steelframe dev`'s embedded Redis is its own: a port another Redis holds is not taken for
a start (its child exits, the other server would answer the ping and `dev` would share that
server's data), and a free port taken between its probe and the child's bind is tried again
elsewhere."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from steelframe import embedded_redis
from steelframe.embedded_redis import EmbeddedRedis, PortTaken, start_embedded_redis
from tests.fakes.patience import PATIENCE_SECONDS


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


def a_pid_that_ended() -> int:
    probe = subprocess.Popen(["true"])
    probe.wait()
    return probe.pid


def test_a_server_left_by_a_start_that_was_killed_is_stopped_by_the_next(tmp_path: Path) -> None:
    """`dev` killed outright (SIGKILL) left its redis-server running in a session of its own,
    and each later `dev` on the folder started one more beside it."""
    folder = tmp_path / "redis"
    left = start_embedded_redis(folder)
    assert left._process is not None
    server_pid = left._process.pid
    (folder / embedded_redis.PIDS).write_text(f"{server_pid} {a_pid_that_ended()}\n")

    try:
        following = start_embedded_redis(folder)
        try:
            assert left._process.wait(timeout=PATIENCE_SECONDS) is not None  # it was stopped
            with redis.Redis.from_url(following.url) as client:
                assert client.ping()
        finally:
            following.stop()
    finally:
        left.stop()  # when the test fails: no server left behind


def test_a_server_whose_starter_still_runs_is_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "redis"
    first = start_embedded_redis(folder)  # started by this process, which is running
    second = start_embedded_redis(folder)
    try:
        with redis.Redis.from_url(first.url) as client:
            assert client.ping()
    finally:
        second.stop()
        first.stop()
