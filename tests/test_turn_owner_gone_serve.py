"""A `steelframe serve` killed mid-turn (SIGKILL: an OOM kill, a crash) cannot end its turn;
a client re-attaching through another serve on the same Redis and database reads the turn's
end anyway, once the turn's slot lapses (a short `STEELFRAME_CHAT_TURN_SLOT_TTL_SECONDS`
here), instead of keep-alives until the relayed frames expire two minutes later; and the
session no longer names the turn as in flight. Real serve processes, a model (the fake
OpenAI server) that holds its answer for good."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.chat.frames import PREFIX, NumberedFrame
from bot.db import Database
from bot.operators import create_operator
from bot.redis_clients import CancellableRedis
from tests.fakes.openai_server import FakeOpenAI, Hold
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.serve_process import serve

pytestmark = pytest.mark.slow  # real serve processes

MODEL = "held-model"
MESSAGE = "what does the release checklist say?"


@pytest.fixture
async def settings(tmp_path: Path, redis_url: str, aiohttp_server: Any) -> dict[str, Any]:
    model = FakeOpenAI()
    model.enqueue(MODEL, [Hold()])  # the one turn's model call: answers never
    model_server = await aiohttp_server(model.app())
    return {
        "model": model,
        "database": f"sqlite:///{tmp_path / 'steelframe.db'}",
        "env": {
            "STEELFRAME_DATA_DIR": str(tmp_path / "data"),
            "STEELFRAME_DATABASE_URL": f"sqlite:///{tmp_path / 'steelframe.db'}",
            "STEELFRAME_REDIS_URL": redis_url,  # both serves: one database and one Redis
            "STEELFRAME_RUNTIME": "openai",
            "STEELFRAME_MODEL": MODEL,
            "STEELFRAME_TOOL_ROUNDS": "0",
            "STEELFRAME_CHECKOUT": str(tmp_path),
            "STEELFRAME_HEARTBEAT_SECONDS": "0.5",
            # Renewed every third of it while its serve lives; lapses a second after a kill.
            "STEELFRAME_CHAT_TURN_SLOT_TTL_SECONDS": "1",
            "OPENAI_BASE_URL": str(model_server.make_url("/v1")),
            "OPENAI_API_KEY": "sk-test",
        },
    }


def _token(database: str) -> str:
    db = Database.from_url(database)  # migrated by serve at start
    try:
        _, token = db.call(create_operator, "ada")
    finally:
        db.dispose()
    return token


async def _relayed(redis_url: str, turn: str, frame_id: int) -> None:
    """Until the turn's relayed frames in Redis reach `frame_id` (XREAD blocks for them)."""
    position = "0-0"
    async with CancellableRedis.from_url(redis_url) as client, asyncio.timeout(PATIENCE_SECONDS):
        while True:
            answer = await client.xread({f"{PREFIX}frames:{turn}": position}, block=1000)
            for _stream, entries in answer:
                for entry_id, fields in entries:
                    position = entry_id
                    if NumberedFrame.stored(fields[b"f"]).id >= frame_id:
                        return


async def _frames(stream: aiohttp.ClientResponse) -> list[dict[str, Any]]:
    """The stream's frames to its end (heartbeat comments skipped)."""
    frames = []
    async for raw in stream.content:
        if raw.startswith(b"data: "):
            frames.append(json.loads(raw[6:]))
    return frames


async def test_a_turn_of_a_killed_serve_ends_for_a_client_reattaching_elsewhere(
    settings: dict[str, Any], tmp_path: Path
) -> None:
    model: FakeOpenAI = settings["model"]
    async with serve(settings["env"], tmp_path, tmp_path / "serve-1.log") as first:
        headers = {"Authorization": f"Bearer {_token(settings['database'])}"}
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{first.url}/api/operator/chat/stream", json={"message": MESSAGE}, headers=headers
            ) as stream,
        ):
            assert stream.status == 200, await stream.text()
            turn = stream.headers["X-Steelframe-Turn"]
            session = stream.headers["X-Steelframe-Session"]
            last = 0
            async with asyncio.timeout(PATIENCE_SECONDS):
                async for raw in stream.content:  # a heartbeat every 0.5 s comes back here
                    if raw.startswith(b"data: "):
                        last = json.loads(raw[6:])["id"]
                    if model.requests:  # the model call is under way (held)
                        break
            assert last, "the turn relayed no frame before its model call"
            # The relay writes in batches: the frames a client saw here are in Redis before
            # the kill (else there is no turn to find elsewhere, as after a kill that beat it).
            await _relayed(settings["env"]["STEELFRAME_REDIS_URL"], turn, last)
            first.process.kill()  # SIGKILL: nothing of the serve runs after this
            await first.process.wait()
    async with (
        serve(settings["env"], tmp_path, tmp_path / "serve-2.log") as second,
        aiohttp.ClientSession() as http,
    ):
        async with (
            asyncio.timeout(PATIENCE_SECONDS),  # not the frames' expiry (two minutes)
            http.get(
                f"{second.url}/api/operator/chat/stream",
                params={"turn": turn},
                headers={**headers, "Last-Event-ID": str(last)},
            ) as again,
        ):
            assert again.status == 200, await again.text()
            frames = await _frames(again)
        assert len(frames) == 1, frames
        [end] = frames
        assert (end["type"], end["reason"], end["id"]) == ("error", "cancelled", last + 1), end
        assert "service stopped" in end["error"] and "went away" in end["error"], end
        async with http.get(
            f"{second.url}/api/operator/chat/session/{session}", headers=headers
        ) as got:
            assert got.status == 200
            stored = await got.json()
        assert stored["turn_in_flight"] is None
        # Another client re-attaching later reads the same end.
        async with (
            asyncio.timeout(PATIENCE_SECONDS),
            http.get(
                f"{second.url}/api/operator/chat/stream",
                params={"turn": turn},
                headers={**headers, "Last-Event-ID": str(last)},
            ) as later,
        ):
            assert later.status == 200, await later.text()
            assert await _frames(later) == frames
    log = second.log_text()
    assert "Traceback" not in log, log[-2000:]
