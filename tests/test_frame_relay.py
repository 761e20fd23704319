"""Chat frames relayed through Redis Streams (bot.chat.frames): what one instance publishes,
another replays from any frame id on, in either of Redis's reply protocols."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.chat.frame_relay import RedisFrameRelay
from bot.chat.frames import PREFIX, NumberedFrame
from bot.contracts.chat import ChatResponse, DeltaFrame, DoneFrame, Frame, StatusFrame
from steelframe.embedded_redis import start_embedded_redis


@pytest.mark.parametrize("protocol", [2, 3])
async def test_a_turn_is_replayed_after_a_frame_id_to_its_terminal_frame(
    redis_url: str, protocol: int
) -> None:
    url = redis_url + ("&" if "?" in redis_url else "?") + f"protocol={protocol}"
    relay = RedisFrameRelay(url, linger=60)
    frames = [
        NumberedFrame.of(101, StatusFrame(text="turn started")),
        NumberedFrame.of(102, DeltaFrame(text="Hel", draft=1)),
        NumberedFrame.of(103, DeltaFrame(text="lo", draft=1)),
        NumberedFrame.of(104, DoneFrame(response=_response("Hello"))),
    ]
    try:
        for frame in frames:
            await relay.publish(7, "turn-1", "session-1", frame)
        located = await relay.locate(7, session_id=None, turn_id=None)
        assert located is not None and located.turn_id == "turn-1"
        replayed = [f async for f in relay.replay("turn-1", after=101, heartbeat=5)]
    finally:
        await relay.close()
    assert replayed == frames[1:]


async def test_frames_are_relayed_after_redis_forgot_the_script_and_expire_with_the_turn(
    tmp_path: Path,
) -> None:
    """A restarted or flushed Redis has no scripts: the relay loads its own again. (A Redis
    of the test's own: SCRIPT FLUSH is server-wide.)"""
    server = start_embedded_redis(tmp_path / "redis")
    relay = RedisFrameRelay(server.url, linger=60)
    other = aioredis.Redis.from_url(server.url)
    try:
        await relay.publish(7, "turn-9", "s", _numbered(1, StatusFrame(text="turn started")))
        await other.script_flush()
        await relay.publish(7, "turn-9", "s", _numbered(2, DeltaFrame(text="a", draft=1)))
        await relay.publish(7, "turn-9", "s", _numbered(3, DoneFrame(response=_response("a"))))
        replayed = [f async for f in relay.replay("turn-9", after=0, heartbeat=5)]
        lingers = await other.pttl(f"{PREFIX}frames:turn-9")
    finally:
        await relay.close()
        await other.aclose()
        server.stop()
    assert [f.id for f in replayed] == [1, 2, 3]
    assert 0 < lingers <= 60_000


async def test_every_frame_of_500_turns_streaming_at_once_is_relayed(redis_url: str) -> None:
    # One pipeline per frame took a pooled connection per frame in flight: past the pool's
    # 100, publishing failed and those frames were missing on every other instance.
    relay = RedisFrameRelay(redis_url, linger=60)
    turns = [f"turn-{n}" for n in range(500)]

    async def stream(operator_id: int, turn_id: str) -> None:
        await relay.publish(operator_id, turn_id, "s", _numbered(1, StatusFrame(text="started")))
        await relay.publish(operator_id, turn_id, "s", _numbered(2, DeltaFrame(text="a", draft=1)))
        await relay.publish(
            operator_id, turn_id, "s", _numbered(3, DoneFrame(response=_response()))
        )

    try:
        await asyncio.gather(*(stream(n, turn) for n, turn in enumerate(turns)))
        for turn_id in turns:
            replayed = [f async for f in relay.replay(turn_id, after=0, heartbeat=5)]
            assert [f.id for f in replayed] == [1, 2, 3], turn_id
    finally:
        await relay.close()


async def test_a_redis_that_stopped_answering_pauses_a_turn_and_never_ends_it() -> None:
    # A listener that never answers: what a frozen redis-server looks like to a client.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        relay = RedisFrameRelay(f"redis://127.0.0.1:{silent.getsockname()[1]}/0", linger=60)
        try:
            frame = _numbered(1, StatusFrame(text="turn started"))
            # returns (after the write timeout) instead of holding the turn for good
            await asyncio.wait_for(relay.publish(1, "turn-1", "s", frame), timeout=60)
        finally:
            await asyncio.wait_for(relay.close(), timeout=60)


async def test_a_frame_that_cannot_be_written_fails_its_turn_and_holds_no_other(
    redis_url: str,
) -> None:
    relay = RedisFrameRelay(redis_url, linger=60)
    try:
        with pytest.raises(TypeError):  # not JSON: its turn fails where it numbers it
            _numbered(1, DeltaFrame(text=object(), draft=1))  # type: ignore[arg-type]
        good = _numbered(1, StatusFrame(text="turn started"))
        await asyncio.wait_for(relay.publish(2, "turn-2", "s", good), timeout=30)
        first = None
        async for frame in relay.replay("turn-2", after=0, heartbeat=5):
            first = frame  # the turn is still going: take its first frame and leave
            break
    finally:
        await relay.close()
    assert first == good


def _numbered(frame_id: int, frame: Frame) -> NumberedFrame:
    return NumberedFrame.of(frame_id, frame)


def _response(reply: str = "") -> ChatResponse:
    return ChatResponse(
        reply=reply,
        intent="none",
        session="s",
        turn_id="t",
        agent="default",
        focus=None,
        history=[],
        retrieve_hits=0,
        retrieved=[],
        retrieval_available=True,
        memory_verdict="answers",
        reasoning="",
        model="m",
        usage={"input_tokens": 0, "output_tokens": 0},
        decision_body=None,
        decision_issue=None,
        pending_title=None,
        pending_body=None,
        pending_kind=None,
        filed_issue_number=None,
        filed_issue_url=None,
        filed_task_started=False,
        notes=[],
    )
