"""`steelframe dev` killed outright (SIGKILL) mid-turn, then started again: the operator's
message was acknowledged (the turn's first frame named its session), so the session shows
it after the restart, answered by a note that the turn did not complete, as a SIGTERM
leaves it (that one recorded by the turn as it was cut). Before, the turn's frames lived in
the embedded Redis, which the next start stops, and nothing of the turn was left. A real
dev process, its model (the fake OpenAI server) holding its answer for good. A turn sent with
an idempotency key answers a send again with that key as its note says."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.chat.frames import OWNER_GONE_TEXT
from bot.chat.turn import CUT_KIND, OWNER_GONE_REPLY
from tests.fakes.dev_process import lines_through, popen_dev
from tests.fakes.openai_server import FakeOpenAI, Hold
from tests.fakes.patience import PATIENCE_SECONDS
from tests.test_dev_demo_loop import CONFIG_VARS

pytestmark = pytest.mark.slow  # real dev processes
MODEL = "held-model"
MESSAGE = "what does the release checklist say?"


@dataclass
class Dev:
    process: subprocess.Popen[str]
    lines: list[str]
    url: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def start_dev(cwd: Path, env: dict[str, str]) -> Dev:
    """`steelframe dev` in `cwd`, once it said where it listens; its output is kept."""
    process = popen_dev(cwd, env)
    lines = lines_through(process, "token: ")
    said = {line.split(":", 1)[0]: line.split(" ", 1)[1].strip() for line in lines if ": " in line}
    assert "token" in said, "".join(lines)

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)

    threading.Thread(target=drain, daemon=True).start()
    return Dev(process, lines, said["url"], said["token"])


def stop_dev(dev: Dev) -> None:
    if dev.process.poll() is None:
        dev.process.terminate()
        dev.process.wait(timeout=PATIENCE_SECONDS)


async def session_of(dev: Dev, session: str) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{dev.url}/api/operator/chat/session/{session}", headers=dev.headers) as got,
    ):
        assert got.status == 200, await got.text()
        found: dict[str, Any] = await got.json()
        return found


@contextlib.asynccontextmanager
async def killed_mid_turn_then_restarted(
    tmp_path: Path, aiohttp_server: Any, *, key: str | None = None
) -> AsyncIterator[tuple[Dev, Dev, str]]:
    """A dev whose turn (sent with `key`, if given) is under way, its model call held, is
    killed outright (SIGKILL) and started again: (the killed dev, the one started again,
    the turn's session); the second is stopped on leaving."""
    model = FakeOpenAI()
    model.enqueue(MODEL, [Hold()])
    model_server = await aiohttp_server(model.app())
    env = {k: v for k, v in os.environ.items() if not k.startswith(CONFIG_VARS)}
    env.update(
        STEELFRAME_RUNTIME="openai",
        STEELFRAME_MODEL=MODEL,
        STEELFRAME_TOOL_ROUNDS="0",
        STEELFRAME_HEARTBEAT_SECONDS="0.5",
        OPENAI_BASE_URL=str(model_server.make_url("/v1")),
        OPENAI_API_KEY="sk-test",
    )
    keyed = {} if key is None else {"Idempotency-Key": key}
    first = await asyncio.to_thread(start_dev, tmp_path, env)
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{first.url}/api/operator/chat/stream",
                json={"message": MESSAGE},
                headers=first.headers | keyed,
            ) as stream,
        ):
            assert stream.status == 200, await stream.text()
            session = stream.headers["X-Steelframe-Session"]
            async with asyncio.timeout(PATIENCE_SECONDS):
                async for raw in stream.content:
                    if raw.startswith(b"data: "):
                        frame = json.loads(raw[6:])
                        assert frame["type"] not in ("done", "error"), frame
                    if model.requests:
                        break  # the turn is under way: its model call is held
            first.process.kill()  # SIGKILL: nothing of dev runs after this
            first.process.wait(timeout=PATIENCE_SECONDS)
    finally:
        stop_dev(first)

    second = await asyncio.to_thread(start_dev, tmp_path, env)
    try:
        yield first, second, session
    finally:
        stop_dev(second)


def cut_note_shown(shown: dict[str, Any], said: str) -> None:
    """The session shows the operator's message, answered by the note that the turn did not
    complete, and no turn in flight."""
    assert shown["turn_in_flight"] is None, said
    messages = shown["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", MESSAGE),
        ("assistant", OWNER_GONE_REPLY),
    ], said
    assert messages[1]["meta"]["kind"] == CUT_KIND


async def test_a_turn_of_a_dev_killed_mid_turn_shows_as_cut_after_the_restart(
    tmp_path: Path, aiohttp_server: Any
) -> None:
    async with killed_mid_turn_then_restarted(tmp_path, aiohttp_server) as (first, second, session):
        shown = await session_of(second, session)
        said = "".join(first.lines[-40:] + second.lines[-40:])
    cut_note_shown(shown, said)


async def test_a_keyed_turn_of_a_dev_killed_mid_turn_answers_its_key_with_the_cut(
    tmp_path: Path, aiohttp_server: Any
) -> None:
    """The message sent again with its key after the restart (the client never had the
    answer) gets the turn's end, which says what the note says: the turn did not complete
    because the service running it went away. It was a 409 "no longer running and recorded
    no end" for that key forever; a new key sends the message afresh."""
    key = {"Idempotency-Key": "sent-before-the-kill"}
    async with (
        killed_mid_turn_then_restarted(tmp_path, aiohttp_server, key=key["Idempotency-Key"]) as (
            first,
            second,
            session,
        ),
        aiohttp.ClientSession(headers=second.headers | key) as http,
    ):
        said = "".join(first.lines[-40:] + second.lines[-40:])
        blocking = await http.post(f"{second.url}/api/operator/chat", json={"message": MESSAGE})
        answer = await blocking.json()
        async with http.post(
            f"{second.url}/api/operator/chat/stream", json={"message": MESSAGE}
        ) as stream:
            assert stream.status == 200, await stream.text()
            body = await stream.text()
        frames = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
        shown = await session_of(second, session)

    assert blocking.status == 503, (answer, said)
    assert answer["code"] == "turn_cancelled" and answer["detail"]["session"] == session
    assert answer["error"] == OWNER_GONE_TEXT
    assert [f["type"] for f in frames] == ["status", "error"], frames
    assert frames[0]["session"] == session and frames[0]["message"] == MESSAGE
    assert frames[1]["reason"] == "cancelled" and frames[1]["error"] == OWNER_GONE_TEXT
    cut_note_shown(shown, said)  # and no second turn ran for the key
