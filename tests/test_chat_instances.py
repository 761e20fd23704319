"""Two service instances sharing one database and one Redis: one turn per operator, stop
from either instance."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import redis

from bot.chat.coordination import KEY_PREFIX, RedisTurnLocks, stop_channel
from bot.runtimes.base import Delta
from tests.conftest import frames_until, make_settings, read_sse
from tests.fakes.lifecycle import PATIENCE_SECONDS, wait_for
from tests.fakes.ports import refused_port
from tests.fakes.runtimes import ScriptedRuntime


async def _until_subscribed(redis_url: str, listeners: int) -> None:
    client = redis.Redis.from_url(redis_url)
    channel = stop_channel(int(client.connection_pool.connection_kwargs.get("db") or 0))
    deadline = asyncio.get_running_loop().time() + PATIENCE_SECONDS
    try:
        while asyncio.get_running_loop().time() < deadline:
            if dict(client.pubsub_numsub(channel)).get(channel.encode(), 0) >= listeners:
                return
            await asyncio.sleep(0.02)
        raise AssertionError("stop listeners never subscribed")
    finally:
        client.close()


async def test_second_instance_refuses_a_concurrent_turn_and_can_stop_it(
    api_factory: Any, tmp_path: Path, redis_url: str
) -> None:
    slow = ScriptedRuntime([[Delta(f"w{i} ") for i in range(500)]], delay=0.02)
    settings = make_settings(tmp_path, redis_url=redis_url)
    first = await api_factory(settings, runtimes=lambda agent: slow)
    other_instance = await api_factory(settings, runtimes=lambda agent: slow)
    second = other_instance.as_operator(first.token)
    await _until_subscribed(redis_url, 2)

    response = await first.post("/api/operator/chat/stream", json={"message": "long one"})
    await frames_until(response, lambda frame: frame["type"] == "delta")
    refused = await second.post("/api/operator/chat", json={"message": "me too"})
    assert refused.status == 409
    assert (await refused.json())["detail"]["session"] == response.headers["X-Steelframe-Session"]

    stopped = await (await second.post("/api/operator/chat/stop")).json()
    assert stopped["stopped"] is True
    frames = await read_sse(response)
    assert frames[-1]["type"] == "error" and frames[-1]["reason"] == "stopped"
    # The turn's runtime call is cancelled as the stop lands (possibly just after the frame).
    await asyncio.wait_for(slow.cancelled.wait(), PATIENCE_SECONDS)

    # the slot is free again, on either instance
    again = await second.post("/api/operator/chat/stream", json={"message": "fresh"})
    assert again.status == 200
    await second.post("/api/operator/chat/stop")
    await read_sse(again)


async def test_a_stop_reaches_only_the_deployment_on_its_redis_database(redis_url: str) -> None:
    """Pub/sub channels are server-wide: two deployments on databases of one Redis server
    must not stop each other's operators. (The other database may be another test
    session's: its stop names an operator id no deployment here has.)"""
    ours = redis_url
    base, db = ours.rsplit("/", 1)
    theirs = f"{base}/{(int(db) + 1) % 16}"
    listening = RedisTurnLocks(ours, ttl_seconds=2.0)
    other = RedisTurnLocks(theirs, ttl_seconds=2.0)
    heard: asyncio.Queue[int] = asyncio.Queue()
    listener = asyncio.create_task(listening.run_listener(heard.put))
    try:
        await _until_subscribed(ours, 1)
        await other.signal_stop(1_000_000)  # another deployment's operator
        await listening.signal_stop(2)  # then ours
        assert await asyncio.wait_for(heard.get(), PATIENCE_SECONDS) == 2  # theirs never came
        assert heard.empty()
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await listening.close()
        await other.close()


async def test_a_renewed_slot_is_kept_and_an_abandoned_one_expires(redis_url: str) -> None:
    # No timing bound is asserted: the abandoned slot lapses some time after its 2 s TTL
    # while the renewed one survives however long that takes (a loaded machine may pause
    # this loop for a while; a renewal every poll keeps well inside the TTL).
    locks = RedisTurnLocks(redis_url, ttl_seconds=2.0)
    try:
        assert await locks.acquire(1, "crashed") is None
        assert await locks.acquire(2, "alive") is None
        assert await locks.acquire(1, "next") == "crashed"  # held until it lapses
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            await locks.renew(2, "alive")
            if await locks.acquire(1, "next") is None:  # the crashed owner's slot lapsed
                break
            assert asyncio.get_running_loop().time() < deadline, "the abandoned slot never lapsed"
            await asyncio.sleep(0.1)
        assert await locks.acquire(2, "other") == "alive"
        await locks.renew(1, "crashed")  # a late renewal by the old owner changes nothing
        held = await locks.holder(1)
        assert held is not None and held.turn_id == "next"
    finally:
        await locks.close()


async def test_slots_a_process_keeps_outlive_their_ttl_and_lapse_once_let_go(
    redis_url: str,
) -> None:
    # One task renews every kept slot, every third of the TTL (6 s here: the renewals have
    # 4 s of slack on a loaded machine). No timing bound is asserted.
    locks = RedisTurnLocks(redis_url, ttl_seconds=6.0)
    admin = redis.Redis.from_url(redis_url)
    try:
        for operator_id, turn_id in ((1, "crashed"), (2, "alive"), (3, "finished")):
            assert await locks.acquire(operator_id, turn_id) is None
        with locks.keep(2, "alive"):
            with locks.keep(3, "finished"):
                pass  # the turn ended at once; its slot is no longer renewed
            # The abandoned and the let-go slots lapse (their keys expire in Redis)...
            await wait_for(lambda: not admin.exists(f"{KEY_PREFIX}1", f"{KEY_PREFIX}3"), within=120)
            assert await locks.acquire(2, "other") == "alive"  # ...the kept one does not
    finally:
        await locks.close()
        admin.close()


async def test_a_turn_resumes_on_the_other_instance_losing_and_doubling_nothing(
    api_factory: Any, tmp_path: Path, redis_url: str
) -> None:
    words = [Delta(f"w{i} ") for i in range(60)]
    runtime = ScriptedRuntime([[*words]], delay=0.01)
    settings = make_settings(tmp_path, redis_url=redis_url)
    first = await api_factory(settings, runtimes=lambda agent: runtime)
    other = (await api_factory(settings, runtimes=lambda agent: runtime)).as_operator(first.token)

    response = await first.post("/api/operator/chat/stream", json={"message": "stream it"})
    seen: list[dict[str, Any]] = []
    async for raw in response.content:
        if raw.startswith(b"data: "):
            seen.append(json.loads(raw[6:]))
            if seen[-1].get("text") == "w5 ":
                break
    session = response.headers["X-Steelframe-Session"]
    response.close()  # the client's connection (and its load balancer route) is gone

    resumed = await other.get(
        f"/api/operator/chat/stream?session={session}",
        headers={"Last-Event-ID": str(seen[-1]["id"])},
    )
    assert resumed.status == 200 and resumed.headers["X-Steelframe-Session"] == session
    frames = seen + await read_sse(resumed)
    ids = [f["id"] for f in frames]
    assert ids == list(range(ids[0], ids[0] + len(frames)))
    assert "".join(f.get("text", "") for f in frames if f["type"] == "delta").split() == [
        f"w{i}" for i in range(60)
    ]
    assert frames[-1]["type"] == "done"

    # Someone else's session, or a turn that never was, is not found on either instance.
    stranger = other.new_operator("stranger")
    refused = await stranger.get(f"/api/operator/chat/stream?session={session}")
    assert refused.status == 404


async def test_chat_keeps_answering_with_redis_down_and_says_so_once(
    api_factory: Any, tmp_path: Path, caplog: Any
) -> None:
    import logging

    # A port nothing listens on: Redis is down.
    settings = make_settings(tmp_path, redis_url=f"redis://127.0.0.1:{refused_port()}/0")
    with caplog.at_level(logging.WARNING):
        api = await api_factory(settings)
        for text in ("first", "second", "third"):
            response = await api.post("/api/operator/chat", json={"message": text})
            assert response.status == 200, await response.text()
        stopped = await api.post("/api/operator/chat/stop")
        assert stopped.status == 200
        resume = await api.get("/api/operator/chat/stream?session=elsewhere1")  # not here
        assert resume.status == 503
        assert "STEELFRAME_REDIS_URL" in (await resume.json())["error"]
    assert api.services.chat_turns.locks.degraded
    outages = [r for r in caplog.records if "Redis unreachable" in r.getMessage()]
    assert len(outages) == 1, [r.getMessage() for r in caplog.records]
    assert "STEELFRAME_REDIS_URL" in outages[0].getMessage()
    # Neither the turn slot nor the frame relay complains per turn or per frame.
    chat_parts = ("bot.chat.coordination", "bot.chat.frame_outbox", "bot.chat.frame_reader")
    warnings = [r.getMessage() for r in caplog.records if r.name in chat_parts]
    assert len(warnings) <= 2, warnings
