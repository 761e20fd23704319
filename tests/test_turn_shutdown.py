"""A `steelframe serve` told to stop (SIGTERM: a deploy, a restart) under a running chat
turn ends that turn for everyone: the turn's stream ends with an `error` frame whose reason,
`cancelled`, says the service stopped it (not its operator), written through to Redis before
the relay closes, so a client re-attaching through the next serve on the same Redis reads it
instead of waiting for frames that never come; and the session keeps the operator's message
with a note that the turn did not complete. Real serve processes, a model (the fake OpenAI
server) that holds its answer for good."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.chat.turn import CUT_KIND, CUT_REPLY
from bot.db import Database
from bot.operators import create_operator
from tests.fakes.openai_server import FakeOpenAI, Hold
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.serve_process import Served, serve

pytestmark = pytest.mark.slow  # real serve processes

MODEL = "held-model"
MESSAGE = "what does the release checklist say?"
# Below aiohttp's own shutdown wait (60 s), which a watched turn that nothing ends waits
# out; far above the second or two a stop takes here, for a loaded machine.
EXIT_BOUND_SECONDS = 30.0


@dataclass
class Setup:
    settings: dict[str, str]
    model: FakeOpenAI
    database: str


@pytest.fixture
async def setup(tmp_path: Path, redis_url: str, aiohttp_server: Any) -> Setup:
    model = FakeOpenAI()
    model.enqueue(MODEL, [Hold()])  # the one turn's model call: answers never
    model_server = await aiohttp_server(model.app())
    database = f"sqlite:///{tmp_path / 'steelframe.db'}"
    settings = {
        "STEELFRAME_DATA_DIR": str(tmp_path / "data"),
        "STEELFRAME_DATABASE_URL": database,  # both serves: one database and one Redis
        "STEELFRAME_REDIS_URL": redis_url,
        "STEELFRAME_RUNTIME": "openai",
        "STEELFRAME_MODEL": MODEL,
        "STEELFRAME_TOOL_ROUNDS": "0",
        "STEELFRAME_CHECKOUT": str(tmp_path),
        "STEELFRAME_HEARTBEAT_SECONDS": "0.5",
        "STEELFRAME_SHUTDOWN_GRACE_SECONDS": "1",
        "OPENAI_BASE_URL": str(model_server.make_url("/v1")),
        "OPENAI_API_KEY": "sk-test",
    }
    return Setup(settings, model, database)


def _token(database: str) -> str:
    db = Database.from_url(database)  # migrated by serve at start
    try:
        _, token = db.call(create_operator, "ada")
    finally:
        db.dispose()
    return token


async def _frame(stream: aiohttp.ClientResponse) -> dict[str, Any] | None:
    """The next frame of a chat stream (heartbeat comments skipped); None at its end."""
    async for raw in stream.content:
        if raw.startswith(b"data: "):
            frame: dict[str, Any] = json.loads(raw[6:])
            return frame
    return None


async def _until_model_holds(stream: aiohttp.ClientResponse, model: FakeOpenAI) -> int:
    """Read the turn's frames until its model call is under way (held); the last frame id."""
    last = 0
    async with asyncio.timeout(PATIENCE_SECONDS):
        async for raw in stream.content:  # a heartbeat every 0.5 s comes back here
            if raw.startswith(b"data: "):
                frame = json.loads(raw[6:])
                assert frame["type"] == "status", frame
                last = frame["id"]
            if model.requests:
                return last
    raise AssertionError("the stream ended before the turn's model call")


async def _rest(stream: aiohttp.ClientResponse) -> list[dict[str, Any]]:
    frames = []
    while (frame := await _frame(stream)) is not None:
        frames.append(frame)
    return frames


@asynccontextmanager
async def _turn_started(
    served: Served, headers: dict[str, str]
) -> AsyncIterator[aiohttp.ClientResponse]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{served.url}/api/operator/chat/stream", json={"message": MESSAGE}, headers=headers
        ) as stream,
    ):
        assert stream.status == 200, await stream.text()
        yield stream


async def _stopped(served: Served, *, signalled: bool = False) -> None:
    if not signalled:
        served.process.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(served.process.wait(), EXIT_BOUND_SECONDS)
    log = served.log_text()
    assert code == 0, log[-2000:]
    assert "Traceback" not in log, log[-2000:]


def _says_the_service_stopped(frame: dict[str, Any]) -> None:
    assert frame["type"] == "error", frame
    assert frame["reason"] == "cancelled", frame  # the service, not the operator ("stopped")
    assert "service stopped" in frame["error"], frame


async def _after_restart(
    setup: Setup, tmp_path: Path, headers: dict[str, str], *, turn: str, session: str, after: int
) -> None:
    """Through a second serve on the same Redis and database: re-attaching reads the turn's
    end, and the session keeps the message and says the turn did not complete."""
    async with (
        serve(setup.settings, tmp_path, tmp_path / "serve-2.log") as second,
        aiohttp.ClientSession() as http,
    ):
        async with (
            asyncio.timeout(PATIENCE_SECONDS),  # not the frames' expiry (two minutes)
            http.get(
                f"{second.url}/api/operator/chat/stream",
                params={"turn": turn},
                headers={**headers, "Last-Event-ID": str(after)},
            ) as again,
        ):
            assert again.status == 200, await again.text()
            frames = await _rest(again)
        assert len(frames) == 1, frames
        _says_the_service_stopped(frames[0])
        async with http.get(
            f"{second.url}/api/operator/chat/session/{session}", headers=headers
        ) as got:
            assert got.status == 200
            stored = await got.json()
        assert stored["turn_in_flight"] is None
        user, note = stored["messages"]
        assert (user["role"], user["content"]) == ("user", MESSAGE)
        assert (note["role"], note["content"]) == ("assistant", CUT_REPLY)
        assert note["meta"]["kind"] == CUT_KIND
        assert stored["title"]  # the message titles the session, as an answered turn's does


async def test_a_watched_turn_cut_by_shutdown_ends_for_its_client_and_after_restart(
    setup: Setup, tmp_path: Path
) -> None:
    """The operator watches the turn as the service stops: past the grace the turn ends on
    the stream they have (not cut off after aiohttp's minute, which a supervisor's SIGKILL
    comes before), and the next serve gives the same end."""
    async with serve(setup.settings, tmp_path, tmp_path / "serve-1.log") as first:
        headers = {"Authorization": f"Bearer {_token(setup.database)}"}
        async with _turn_started(first, headers) as stream:
            turn, session = (
                stream.headers["X-Steelframe-Turn"],
                stream.headers["X-Steelframe-Session"],
            )
            last = await _until_model_holds(stream, setup.model)
            first.process.send_signal(signal.SIGTERM)
            rest = await asyncio.wait_for(_rest(stream), EXIT_BOUND_SECONDS)
        assert rest, "the stream ended without the turn's end"
        _says_the_service_stopped(rest[-1])
        await _stopped(first, signalled=True)
    assert setup.model.requests[0].client_gone.is_set()  # the model call was closed too
    await _after_restart(setup, tmp_path, headers, turn=turn, session=session, after=last)


async def test_a_turn_nobody_watches_cut_by_shutdown_ends_for_a_client_after_restart(
    setup: Setup, tmp_path: Path
) -> None:
    """The operator closed the tab mid-turn; the service stops, then comes back: reopening
    the chat re-attaches to a turn that has ended, and says why."""
    async with serve(setup.settings, tmp_path, tmp_path / "serve-1.log") as first:
        headers = {"Authorization": f"Bearer {_token(setup.database)}"}
        async with _turn_started(first, headers) as stream:
            turn, session = (
                stream.headers["X-Steelframe-Turn"],
                stream.headers["X-Steelframe-Session"],
            )
            last = await _until_model_holds(stream, setup.model)
        await _stopped(first)
    await _after_restart(setup, tmp_path, headers, turn=turn, session=session, after=last)
