"""An `error` frame's `reason` is one of the words the chat contracts declare (ErrorReason,
bot/contracts/chat.py; the clients' copies are generated from it). Each way a turn fails is
driven here through the operator API, over real turns (a scripted model, or one that fails),
and its word checked; the API fixture also checks every frame against the OpenAPI document,
which refuses a reason outside the enum. A producer added with a word of its own fails here
until the enum and this list name it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.contracts.chat import ErrorReason
from bot.runtimes.base import RuntimeError_, RuntimeEvent, RuntimeRequest
from tests.conftest import ApiClient, frames_until, make_settings, read_sse
from tests.fakes.events import EventsFeed
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime, reply


@dataclass
class FailingRuntime:
    """A model call that fails as it starts, with `failure`."""

    failure: Exception
    name: str = "failing"
    model: str = "failing-model"

    async def stream(self, request: RuntimeRequest) -> AsyncIterator[RuntimeEvent]:
        raise self.failure
        yield  # (an async generator, as a runtime's stream is)


def _held() -> ScriptedRuntime:
    """A model that answers only once told to (never, here): the turn runs until ended."""
    return ScriptedRuntime([reply("never sent")], gate=asyncio.Event())


async def _started(api: ApiClient) -> Any:
    response = await api.post("/api/operator/chat/stream", json={"message": "a question"})
    assert response.status == 200, await response.text()
    await frames_until(response, lambda f: f["type"] == "status")
    return response


async def _ended(response: Any) -> dict[str, Any]:
    frames = await read_sse(response)
    assert frames[-1]["type"] == "error", frames[-1]
    return frames[-1]


async def _stopped(api_factory: Any, tmp_path: Path) -> dict[str, Any]:
    runtime = _held()
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    response = await _started(api)
    assert (await (await api.post("/api/operator/chat/stop")).json())["stopped"] is True
    return await _ended(response)


async def _cancelled(api_factory: Any, tmp_path: Path) -> dict[str, Any]:
    """The service stopping (its turns are cancelled as it shuts down), not the operator."""
    runtime = _held()
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    response = await _started(api)
    async with asyncio.timeout(PATIENCE_SECONDS):
        await runtime.called.wait()
    await api.services.registry.close()
    return await _ended(response)


async def _runtime(api_factory: Any, tmp_path: Path) -> dict[str, Any]:
    runtime = FailingRuntime(RuntimeError_("the model refused the request"))
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    ended = await _ended(await _started(api))
    assert ended["error"] == "the model refused the request"
    return ended


async def _timeout(api_factory: Any, tmp_path: Path) -> dict[str, Any]:
    runtime = _held()
    settings = make_settings(tmp_path, turn_timeout_seconds=0.3)
    api = await api_factory(settings, runtimes=lambda agent: runtime)
    return await _ended(await _started(api))


async def _session_deleted(api_factory: Any, tmp_path: Path) -> dict[str, Any]:
    """Deleted through another instance, which cannot stop the turn: it writes nothing."""
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("too late")], gate=gate)
    settings = make_settings(tmp_path)
    api = await api_factory(settings, runtimes=lambda agent: runtime)
    elsewhere = (await api_factory(settings)).as_operator(api.token)
    response = await _started(api)
    session = response.headers["X-Steelframe-Session"]
    assert (await api.get(f"/api/operator/chat/session/{session}")).status == 200
    assert (await elsewhere.delete(f"/api/operator/chat/session/{session}")).status == 200
    gate.set()
    return await _ended(response)


async def _internal(api_factory: Any, tmp_path: Path) -> dict[str, Any]:
    runtime = FailingRuntime(ValueError("a bug of ours"))
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    ended = await _ended(await _started(api))
    assert "a bug of ours" not in ended["error"]  # said in the log, not to the operator
    return ended


FAILURES: dict[ErrorReason, Callable[[Any, Path], Awaitable[dict[str, Any]]]] = {
    ErrorReason.STOPPED: _stopped,
    ErrorReason.CANCELLED: _cancelled,
    ErrorReason.RUNTIME: _runtime,
    ErrorReason.TIMEOUT: _timeout,
    ErrorReason.SESSION_DELETED: _session_deleted,
    ErrorReason.INTERNAL: _internal,
}


def test_every_error_reason_is_a_way_a_turn_fails_here() -> None:
    assert set(FAILURES) == set(ErrorReason)


@pytest.mark.parametrize("reason", list(FAILURES), ids=str)
async def test_a_failed_turn_ends_with_its_word(
    reason: ErrorReason, api_factory: Any, tmp_path: Path
) -> None:
    ended = await FAILURES[reason](api_factory, tmp_path)
    assert ended["reason"] == reason.value, ended


@pytest.mark.parametrize(
    ("runtime", "settings", "status"),
    [
        (_held, {"turn_timeout_seconds": 0.3}, 504),
        (lambda: FailingRuntime(RuntimeError_("refused")), {}, 502),
        (lambda: FailingRuntime(ValueError("a bug")), {}, 500),
    ],
    ids=["timeout", "runtime", "internal"],
)
async def test_the_blocking_turn_answers_the_status_and_code_of_its_word(
    runtime: Callable[[], Any],
    settings: dict[str, Any],
    status: int,
    api_factory: Any,
    tmp_path: Path,
) -> None:
    model = runtime()
    api = await api_factory(make_settings(tmp_path, **settings), runtimes=lambda agent: model)
    answer = await api.post("/api/operator/chat", json={"message": "a question"})
    body = await answer.json()
    assert answer.status == status, body
    word = body["detail"]["reason"]
    assert word in set(ErrorReason) and body["code"] == f"turn_{word}", body


async def test_a_chat_whose_first_turn_fails_is_announced_to_other_clients(
    api_factory: Any, tmp_path: Path
) -> None:
    """The session is stored (and listed) from the turn's start, whatever becomes of the
    turn: the other open clients hear of it then, not only once a reply is stored."""
    model = FailingRuntime(RuntimeError_("refused"))
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: model)
    feed = await EventsFeed.open(api)
    try:
        answer = await api.post("/api/operator/chat", json={"message": "a question"})
        session = (await answer.json())["detail"]["session"]
        assert answer.status == 502
        announced = await feed.wait_for(lambda f: f.get("type") == "session")
        assert (announced["session_id"], announced["change"]) == (session, "created")
        listed = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
        assert [s["id"] for s in listed] == [session]
    finally:
        await feed.close()


async def test_a_model_that_fails_or_times_out_is_logged_as_a_warning(
    api_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Streamed turns whose model failed ended with an error frame and left nothing in the
    log: whoever runs the service saw the failures only as a metric."""
    caplog.set_level(logging.WARNING, logger="bot.chat.cited_drafting")
    await _runtime(api_factory, tmp_path)
    (tmp_path / "timeout").mkdir()
    await _timeout(api_factory, tmp_path / "timeout")
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("the model failed: the model refused the request" in line for line in said), said
    assert any("did not finish within 0.3 s" in line for line in said), said
