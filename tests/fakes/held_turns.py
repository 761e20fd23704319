"""A chat turn held on real `steelframe serve` processes (tests.fakes.serve_process): its
model (the fake OpenAI server) never answers, so the turn is in flight for as long as a test
wants, while the test stops or kills its serve and re-attaches through another one on the
same Redis and database."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bot.db import Database
from bot.operators import create_operator
from tests.fakes.openai_server import FakeOpenAI, Hold
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.serve_process import Served

MODEL = "held-model"
MESSAGE = "what does the release checklist say?"


@dataclass
class HeldTurnSetup:
    settings: dict[str, str]  # every serve's environment: one database and one Redis
    model: FakeOpenAI
    database: str


async def held_turn_setup(
    tmp_path: Path, redis_url: str, aiohttp_server: Any, **more: str
) -> HeldTurnSetup:
    """Serve settings whose one chat turn's model call answers never; `more` adds settings
    (a short slot TTL, a shutdown grace)."""
    model = FakeOpenAI()
    model.enqueue(MODEL, [Hold()])
    model_server = await aiohttp_server(model.app())
    database = f"sqlite:///{tmp_path / 'steelframe.db'}"
    settings = {
        "STEELFRAME_DATA_DIR": str(tmp_path / "data"),
        "STEELFRAME_DATABASE_URL": database,
        "STEELFRAME_REDIS_URL": redis_url,
        "STEELFRAME_RUNTIME": "openai",
        "STEELFRAME_MODEL": MODEL,
        "STEELFRAME_TOOL_ROUNDS": "0",
        "STEELFRAME_CHECKOUT": str(tmp_path),
        "STEELFRAME_HEARTBEAT_SECONDS": "0.5",
        "OPENAI_BASE_URL": str(model_server.make_url("/v1")),
        "OPENAI_API_KEY": "sk-test",
        **more,
    }
    return HeldTurnSetup(settings, model, database)


def operator_headers(database: str) -> dict[str, str]:
    """An operator's bearer token (the database is migrated by serve at start)."""
    db = Database.from_url(database)
    try:
        _, token = db.call(create_operator, "ada")
    finally:
        db.dispose()
    return {"Authorization": f"Bearer {token}"}


@dataclass
class HeldTurn:
    stream: aiohttp.ClientResponse  # the turn's SSE stream, as its client reads it
    turn: str
    session: str
    seen: list[dict[str, Any]]  # the frames read until the model call was held

    @property
    def last(self) -> int:
        """The id of the last frame seen (0 for none)."""
        return self.seen[-1]["id"] if self.seen else 0


@asynccontextmanager
async def held_turn(
    served: Served, headers: dict[str, str], model: FakeOpenAI
) -> AsyncIterator[HeldTurn]:
    """A turn of `MESSAGE` sent to `served`, its stream read until its model call is under
    way (held): the stream stays open while the context is."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{served.url}/api/operator/chat/stream", json={"message": MESSAGE}, headers=headers
        ) as stream,
    ):
        assert stream.status == 200, await stream.text()
        turn = HeldTurn(
            stream, stream.headers["X-Steelframe-Turn"], stream.headers["X-Steelframe-Session"], []
        )
        async with asyncio.timeout(PATIENCE_SECONDS):
            async for raw in stream.content:  # a heartbeat every 0.5 s comes back here
                if raw.startswith(b"data: "):
                    turn.seen.append(json.loads(raw[6:]))
                if model.requests:
                    break
            else:
                raise AssertionError("the stream ended before the turn's model call")
        yield turn


async def frames_to_end(stream: aiohttp.ClientResponse) -> list[dict[str, Any]]:
    """The stream's frames to its end (heartbeat comments skipped)."""
    frames = []
    async for raw in stream.content:
        if raw.startswith(b"data: "):
            frames.append(json.loads(raw[6:]))
    return frames


async def reattached(
    served: Served, headers: dict[str, str], *, turn: str, after: int
) -> list[dict[str, Any]]:
    """What a client re-attaching to `turn` through `served` after frame `after` reads, to
    the stream's end: within the tests' patience, not the frames' expiry (two minutes)."""
    async with (
        aiohttp.ClientSession() as http,
        asyncio.timeout(PATIENCE_SECONDS),
        http.get(
            f"{served.url}/api/operator/chat/stream",
            params={"turn": turn},
            headers={**headers, "Last-Event-ID": str(after)},
        ) as again,
    ):
        assert again.status == 200, await again.text()
        return await frames_to_end(again)


async def stored_session(served: Served, headers: dict[str, str], session: str) -> Any:
    """The session as `GET .../chat/session/{id}` answers it."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{served.url}/api/operator/chat/session/{session}", headers=headers) as got,
    ):
        assert got.status == 200
        return await got.json()
