"""Whole chat turns through the real API with the `openai` runtime and a local model server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.config_values import Secret
from tests.conftest import ApiClient, make_settings, read_sse
from tests.fakes.openai_server import Content, FakeOpenAI, Hold, HttpError, StreamError, answer

KEY = "sk-test-chat-turns-0123456789"
TRAILER = 'STEELFRAME_META: {"intent": "answer"}'


@pytest.fixture
def fake() -> FakeOpenAI:
    return FakeOpenAI(api_key=KEY)


@pytest.fixture
async def settings_with_runtime(fake: FakeOpenAI, aiohttp_server: Any, tmp_path: Path) -> Settings:
    server = await aiohttp_server(fake.app())
    settings = make_settings(
        tmp_path,
        runtime="openai",
        model="gpt-test",
        openai_base_url=str(server.make_url("/v1")),
        openai_api_key=Secret(KEY),
        fallbacks=["gpt-backup"],
        model_prices={
            "gpt-test": {"input": 2.0, "output": 8.0},
            "gpt-backup": {"input": 1.0, "output": 1.0},
        },
    )
    (settings.checkout / "README.md").write_text("Steelframe sandbox\n")
    return settings


async def _stream(api: ApiClient, message: str) -> list[dict[str, Any]]:
    response = await api.post("/api/operator/chat/stream", json={"message": message})
    assert response.status == 200
    return await read_sse(response)


async def _stored(api: ApiClient, session: str) -> list[dict[str, Any]]:
    detail = await (await api.get(f"/api/operator/chat/session/{session}")).json()
    return list(detail["messages"])


async def test_a_turn_streams_thinking_delta_done_and_records_route_and_usage(
    api_factory: Any, settings_with_runtime: Settings, fake: FakeOpenAI
) -> None:
    fake.enqueue(
        "gpt-test",
        answer(
            f"The sandbox is healthy.\n{TRAILER}", reasoning="Check the README.", usage=(1200, 300)
        ),
    )
    api = await api_factory(settings_with_runtime)
    frames = await _stream(api, "How is the sandbox?")
    types = [f["type"] for f in frames]
    assert types[0] == "status" and types[-1] == "done"
    assert types.index("thinking") < types.index("delta")
    assert "".join(f["text"] for f in frames if f["type"] == "thinking") == "Check the README."
    streamed = "".join(f["text"] for f in frames if f["type"] == "delta")
    assert "STEELFRAME_META" not in streamed and streamed.strip() == "The sandbox is healthy."
    done = frames[-1]["response"]
    assert done["reply"] == "The sandbox is healthy." and done["model"] == "gpt-test"
    assert done["usage"] == {"input_tokens": 1200, "output_tokens": 300}
    assert done["reasoning"] == "Check the README."
    _, assistant = await _stored(api, done["session"])
    meta = assistant["meta"]
    assert meta["model"] == meta["requested_model"] == "gpt-test"
    assert meta["endpoint"] == settings_with_runtime.openai_base_url.rstrip("/")
    assert meta["usage"] == {"input_tokens": 1200, "output_tokens": 300}
    assert assistant["reasoning"] == "Check the README."
    sent = fake.requests[0].body
    assert sent["messages"][-1] == {"role": "user", "content": "How is the sandbox?"}
    assert sent["messages"][0]["role"] == "system"


async def test_a_turn_records_its_cost_and_context_budget(
    api_factory: Any, settings_with_runtime: Settings, fake: FakeOpenAI
) -> None:
    """Needs the service to record `cost_usd` and `context` (see docs/runtimes.md)."""
    fake.enqueue("gpt-test", answer(f"Fine.\n{TRAILER}", usage=(1_000_000, 250_000)))
    api = await api_factory(settings_with_runtime)
    frames = await _stream(api, "Cost?")
    _, assistant = await _stored(api, frames[-1]["response"]["session"])
    assert assistant["meta"]["cost_usd"] == pytest.approx(2.0 + 2.0)
    context = assistant["meta"]["context"]
    assert context["window"] == settings_with_runtime.context_tokens
    assert context["trimmed"] is False and context["before_messages"] == 1


async def test_fallback_turn_records_requested_and_actual_model(
    api_factory: Any, settings_with_runtime: Settings, fake: FakeOpenAI
) -> None:
    fake.enqueue("gpt-test", HttpError(429, "Rate limit reached", "requests"))
    fake.enqueue("gpt-backup", answer(f"From the backup.\n{TRAILER}", usage=(10, 5)))
    api = await api_factory(settings_with_runtime)
    frames = await _stream(api, "Anyone there?")
    statuses = [f["text"] for f in frames if f["type"] == "status"]
    assert any(text.startswith("gpt-test unavailable · trying gpt-backup") for text in statuses)
    assert frames[-1]["response"]["model"] == "gpt-backup"
    _, assistant = await _stored(api, frames[-1]["response"]["session"])
    assert assistant["meta"]["requested_model"] == "gpt-test"
    assert assistant["meta"]["model"] == "gpt-backup"
    assert assistant["meta"]["usage"] == {"input_tokens": 10, "output_tokens": 5}


async def test_failure_after_content_is_an_error_frame_and_stores_nothing(
    api_factory: Any, settings_with_runtime: Settings, fake: FakeOpenAI
) -> None:
    fake.enqueue("gpt-test", [Content("Half of"), StreamError("upstream crashed", code=500)])
    fake.enqueue("gpt-backup", answer("never asked"))
    api = await api_factory(settings_with_runtime)
    frames = await _stream(api, "Tell me everything")
    error = frames[-1]
    assert error["type"] == "error" and error["reason"] == "runtime"
    assert "upstream crashed" in error["error"] and "Traceback" not in error["error"]
    assert [r.model for r in fake.requests] == ["gpt-test"]
    assert await _stored(api, frames[0]["session"]) == []


async def test_a_rejected_key_is_an_error_frame_without_the_key(
    api_factory: Any, settings_with_runtime: Settings, fake: FakeOpenAI
) -> None:
    fake.api_key = "sk-the-server-wants-another-key"
    api = await api_factory(settings_with_runtime)
    frames = await _stream(api, "hello")
    assert frames[-1]["type"] == "error" and "HTTP 401" in frames[-1]["error"]
    assert KEY not in json.dumps(frames)


async def test_stop_closes_the_upstream_request_and_stores_nothing(
    api_factory: Any, settings_with_runtime: Settings, fake: FakeOpenAI
) -> None:
    fake.enqueue("gpt-test", [Content("Working on it"), Hold()])
    api = await api_factory(settings_with_runtime)
    response = await api.post("/api/operator/chat/stream", json={"message": "long one"})
    first = await read_sse(response, until="delta")
    assert first[-1]["type"] == "delta"
    assert (await (await api.post("/api/operator/chat/stop")).json())["stopped"] is True
    async with asyncio.timeout(2):
        await fake.requests[0].client_gone.wait()
    rest = await read_sse(response)
    assert rest[-1]["type"] == "error" and rest[-1]["reason"] == "stopped"
    assert await _stored(api, first[0]["session"]) == []
