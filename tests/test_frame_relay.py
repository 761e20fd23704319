"""Chat frames relayed through Redis Streams (bot.chat.frames): what one instance publishes,
another replays from any frame id on, in either of Redis's reply protocols."""

from __future__ import annotations

import pytest

from bot.chat.frames import RedisFrameRelay


@pytest.mark.parametrize("protocol", [2, 3])
async def test_a_turn_is_replayed_after_a_frame_id_to_its_terminal_frame(
    redis_url: str, protocol: int
) -> None:
    url = redis_url + ("&" if "?" in redis_url else "?") + f"protocol={protocol}"
    relay = RedisFrameRelay(url, linger=60)
    frames = [
        {"id": 101, "type": "status", "text": "turn started"},
        {"id": 102, "type": "delta", "text": "Hel"},
        {"id": 103, "type": "delta", "text": "lo"},
        {"id": 104, "type": "done", "response": {"reply": "Hello"}},
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
