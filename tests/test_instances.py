"""Two real `serve` processes on one PostgreSQL and one Redis, as behind a load balancer: a
chat turn started through one is resumed and stopped through the other, and a webhook
delivered to both is stored and processed once."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select

from bot.db import Database
from bot.operators import create_operator
from tests.conftest import GITHUB_DATA, WEBHOOK_SECRET, webhook_headers
from tests.fakes.lifecycle import wait_for
from tests.fakes.openai_server import Content, FakeOpenAI, Hold, Pause
from webhooks.deliveries import WebhookDelivery

MODEL = "instances-model"


async def _serve(env: dict[str, str], cwd: Path, started: list[asyncio.subprocess.Process]) -> str:
    """Start a serve process (kept in `started` at once, so it is stopped whatever fails
    next) and return its URL."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "steelframe.cli",
        "serve",
        "--port",
        "0",
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    started.append(process)
    assert process.stdout is not None
    while line := (await asyncio.wait_for(process.stdout.readline(), 120)).decode():
        if line.startswith("url: "):
            return line.split(" ", 1)[1].strip()
    raise AssertionError(f"serve printed no url (exit {await process.wait()})")


@pytest.fixture
async def instances(
    aiohttp_server: Any, pg_url: str, redis_url: str, tmp_path: Path
) -> AsyncIterator[tuple[list[str], str, FakeOpenAI, str]]:
    model = FakeOpenAI()
    model_server = await aiohttp_server(model.app())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEELFRAME_", "LOG_"))}
    env |= {
        "STEELFRAME_DATABASE_URL": pg_url,
        "STEELFRAME_REDIS_URL": redis_url,
        "STEELFRAME_RUNTIME": "openai",
        "STEELFRAME_MODEL": MODEL,
        "STEELFRAME_TOOL_ROUNDS": "0",
        "STEELFRAME_CHECKOUT": str(tmp_path),
        "OPENAI_BASE_URL": str(model_server.make_url("/v1")),
        "OPENAI_API_KEY": "sk-test",
        "WEBHOOK_SECRET": WEBHOOK_SECRET,
    }
    processes: list[asyncio.subprocess.Process] = []
    urls: list[str] = []
    try:
        for name in ("a", "b"):  # one after the other: the first applies the migrations
            data = {"STEELFRAME_DATA_DIR": str(tmp_path / name)}
            urls.append(await _serve(env | data, tmp_path, processes))
        database = Database.from_url(pg_url)
        _, token = database.call(create_operator, "operator")
        database.dispose()
        yield urls, token, model, pg_url
    finally:
        for process in processes:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 30)
                except TimeoutError:
                    process.kill()
                    await process.wait()


async def _frames(
    response: aiohttp.ClientResponse, stop_after: int | None = None
) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    async for raw in response.content:
        if raw.startswith(b"data: "):
            frames.append(json.loads(raw[6:]))
            deltas = sum(f["type"] == "delta" for f in frames)
            if frames[-1]["type"] in ("done", "error") or deltas == stop_after:
                break
    return frames


async def test_a_turn_resumes_and_stops_through_the_other_instance(
    instances: tuple[list[str], str, FakeOpenAI, str],
) -> None:
    (a, b), token, model, _ = instances
    model.enqueue(MODEL, [Content("w0 "), Content("w1 "), Pause(0.4), Content("w2 "), Hold()])
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        started = await http.post(f"{a}/api/operator/chat/stream", json={"message": "go on"})
        seen = await _frames(started, stop_after=2)
        session = started.headers["X-Steelframe-Session"]
        started.close()  # the client's route to instance A is gone

        resumed = await http.get(
            f"{b}/api/operator/chat/stream?session={session}",
            headers={"Last-Event-ID": str(seen[-1]["id"])},
        )
        assert resumed.status == 200
        more = await _frames(resumed, stop_after=1)
        assert [f["text"] for f in more if f["type"] == "delta"] == ["w2 "]
        assert more[0]["id"] == seen[-1]["id"] + 1  # nothing lost, nothing doubled

        stopped = await (await http.post(f"{b}/api/operator/chat/stop")).json()
        assert stopped["stopped"] is True and stopped["session"] == session
        rest = await _frames(resumed)
        assert rest[-1]["type"] == "error" and rest[-1]["reason"] == "stopped"
        await asyncio.wait_for(model.requests[-1].client_gone.wait(), 30)  # the model call closed


async def test_a_delivery_sent_to_both_instances_is_stored_and_processed_once(
    instances: tuple[list[str], str, FakeOpenAI, str],
) -> None:
    (a, b), _, _, pg_url = instances
    body = (GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_bytes()
    headers = webhook_headers(body, "issues", delivery="twice-delivered")
    async with aiohttp.ClientSession() as http:
        answers = await asyncio.gather(
            *(http.post(f"{url}/api/github/webhooks", data=body, headers=headers) for url in (a, b))
        )
        assert sorted(answer.status for answer in answers) == [200, 202]  # one is the duplicate

    database = Database.from_url(pg_url)
    try:

        def rows() -> list[tuple[str, int]]:
            return database.call(
                lambda s: [(d.status, d.attempts) for d in s.scalars(select(WebhookDelivery))]
            )

        await wait_for(lambda: rows() == [("processed", 1)], within=60)
    finally:
        database.dispose()
