"""HEAD on the SSE routes (aiohttp serves HEAD on every GET route) answers the GET's status
and headers with no body, and ends: it never streams, so it holds no handler or subscription
and a keep-alive proxy reads no stray bytes as the next answer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.runtimes.base import Delta
from tests.conftest import ApiClient, make_settings, read_sse
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime
from tests.raw_http import RawAnswer, request_bytes, send_raw


async def head(api: ApiClient, path: str) -> RawAnswer:
    """A HEAD, read until the server closes the connection (a streamed body never ends)."""
    bearer = {"Authorization": f"Bearer {api.token}".encode()}
    return await send_raw(api.raw.server, request_bytes("HEAD", path, bearer))


async def test_head_on_the_events_stream_is_its_headers_only(api: ApiClient) -> None:
    answer = await head(api, "/api/operator/events")
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.headers["x-request-id"]
    assert answer.body == b""


async def test_head_on_a_turns_stream_is_its_headers_only_and_the_turn_goes_on(
    api_factory: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Delta("held "), Delta("then done")]], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    turn = await api.post("/api/operator/chat/stream", json={"message": "hold on"})
    await asyncio.wait_for(runtime.called.wait(), PATIENCE_SECONDS)
    session = turn.headers["X-Steelframe-Session"]
    answer = await head(api, f"/api/operator/chat/stream?session={session}")
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.headers["x-steelframe-session"] == session
    assert answer.body == b""
    gate.set()
    frames = await read_sse(turn)
    assert frames[-1]["type"] == "done"


async def test_head_answers_the_status_its_get_would(api: ApiClient) -> None:
    assert (await head(api, "/api/operator/chat/stream?session=abc123")).status == 404
    refused = await send_raw(api.raw.server, request_bytes("HEAD", "/api/operator/events"))
    assert refused.status == 401 and refused.body == b""
