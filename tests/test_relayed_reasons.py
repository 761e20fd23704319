"""A rolling deploy: a turn re-attached through an instance of this release is replayed from
the frames another release relayed through Redis (bot/chat/frames.py). A frame whose
`reason` this release has no word for (an older release's status reason was an error's
text; a newer one may add a word to an error frame) is read without it, its words kept as a
status frame's `detail`; the replay goes on to the turn's end. The frames are written into
a real Redis as the other release's relay wrote them, and the turn re-attached through the
operator API, whose answers the fixture checks against this release's OpenAPI document (a
reason outside the enums would break it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis
from sqlalchemy.orm import Session

from bot.chat.frames import PREFIX, NumberedFrame
from bot.operators import create_operator
from tests.conftest import make_settings, read_sse
from tests.fakes.patience import PATIENCE_SECONDS

TURN = "0f3c9a7e5b2d4c1e8a6f0b9d7c5e3a1f"
SESSION = "5e1d3c7b9a0f4e2d8c6b1a3f5e7d9c0b"
LINGER_MS = 60_000
DENSE_TEXT = "retrieve 2/3 · 0 hits · dense ranking unavailable"
RETRIEVE_WHY = "IndexCorrupt: the index manifest is not JSON"
DENSE_WHY = "ConnectError: cannot reach the embeddings endpoint (connection refused)"

# The turn as the other releases' relays stored it, in order (`id` first, as encode_frame
# writes it).
STORED: list[dict[str, Any]] = [
    {"type": "status", "text": "turn started", "session": SESSION, "turn_id": TURN},
    {"type": "status", "text": "retrieve unavailable", "reason": RETRIEVE_WHY},
    {"type": "status", "text": DENSE_TEXT, "reason": DENSE_WHY, "round": 2, "rounds": 3},
    {"type": "status", "text": "a gap", "reason": "frames_lost"},  # a word of both
    {"type": "delta", "text": "Half an answer", "draft": 1},
    {"type": "error", "error": "the turn was over budget", "reason": "over_budget"},
]
# What the replay sends for them.
REPLAYED: list[dict[str, Any]] = [
    STORED[0],
    {"type": "status", "text": "retrieve unavailable", "detail": RETRIEVE_WHY},
    {"type": "status", "text": DENSE_TEXT, "detail": DENSE_WHY, "round": 2, "rounds": 3},
    STORED[3],
    STORED[4],
    {"type": "error", "error": "the turn was over budget"},
]


def _operator(session: Session) -> tuple[int, str]:
    operator, token = create_operator(session, "rolling")
    return operator.id, token


def _relay_as_another_release(url: str, operator_id: int) -> None:
    client = redis.Redis.from_url(url)
    try:
        stream = f"{PREFIX}frames:{TURN}"
        for number, frame in enumerate(STORED, start=1):
            client.xadd(stream, {"f": json.dumps({"id": number, **frame})})
        client.pexpire(stream, LINGER_MS)
        latest = json.dumps({"turn_id": TURN, "session_id": SESSION})
        client.set(f"{PREFIX}latest:{operator_id}", latest, px=LINGER_MS)
        client.set(f"{PREFIX}turn:{TURN}:operator", operator_id, px=LINGER_MS)
    finally:
        client.close()


async def test_a_turn_relayed_by_another_release_replays_to_its_end(
    api_factory: Any, tmp_path: Path, redis_url: str
) -> None:
    api = await api_factory(make_settings(tmp_path, redis_url=redis_url))
    operator_id, token = api.services.db.call(_operator)
    _relay_as_another_release(redis_url, operator_id)
    response = await api.as_operator(token).get(f"/api/operator/chat/stream?turn={TURN}")
    assert response.status == 200, await response.text()
    async with asyncio.timeout(PATIENCE_SECONDS):  # (an unreadable frame left it hanging)
        frames = await read_sse(response)
    assert frames == [{"id": n, **f} for n, f in enumerate(REPLAYED, start=1)]


def test_what_this_release_writes_is_read_as_strictly_as_before() -> None:
    """Only a `reason` is ever let go: a frame unreadable for anything else is refused."""
    bad_round = b'{"id":2,"type":"status","text":"t","reason":"ValueError: no","round":"two"}'
    with pytest.raises(msgspec.ValidationError):
        NumberedFrame.stored(bad_round)
    with pytest.raises(msgspec.ValidationError):
        NumberedFrame.decode(b'{"id":2,"type":"status","text":"t","reason":"ValueError: no"}')
    kept = NumberedFrame.stored(b'{"id":2,"type":"status","text":"t","reason":"frames_lost"}')
    assert kept.data == b'{"id":2,"type":"status","text":"t","reason":"frames_lost"}'
