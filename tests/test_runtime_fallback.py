"""Ordered fallback: taken only before content, pinned after, reported as the actual route."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.config import AgentConfig, Settings
from bot.config_values import Secret
from bot.runtimes.base import Delta, Route, Runtime, Status
from bot.runtimes.fallback import FallbackRuntime
from bot.runtimes.registry import build_runtime
from tests.conftest import make_settings
from tests.fakes.anthropic_server import ErrorEvent, FakeAnthropic, Ping, Start
from tests.fakes.model_calls import (
    collect,
    collect_until_error,
    runtime_request,
    text_of,
    unused_port,
)
from tests.fakes.openai_server import Content, FakeOpenAI, HttpError, StreamError, answer

OPENAI_KEY = "sk-test-openai-fallbacks-0000"


@pytest.fixture
def openai_fake() -> FakeOpenAI:
    return FakeOpenAI(api_key=OPENAI_KEY)


@pytest.fixture
async def openai_url(openai_fake: FakeOpenAI, aiohttp_server: Any) -> str:
    return str((await aiohttp_server(openai_fake.app())).make_url("/v1"))


def settings_for(tmp_path: Path, url: str, fallbacks: list[Any], **extra: Any) -> Settings:
    return make_settings(
        tmp_path,
        runtime="openai",
        model="big",
        fallbacks=fallbacks,
        openai_base_url=url,
        openai_api_key=Secret(OPENAI_KEY),
        tool_rounds=0,
        **extra,
    )


def runtime_for(settings: Settings) -> Runtime:
    return build_runtime(settings.runtime, settings, settings.agents["default"])


@pytest.mark.parametrize(
    "failure",
    [
        HttpError(429, "Rate limit reached for big", "requests", headers={"Retry-After": "2"}),
        HttpError(500, "The server had an error while processing your request", "server_error"),
        HttpError(503, "The engine is currently overloaded", "server_error"),
        [StreamError("Rate limit exceeded", type="rate_limit_exceeded", code=429)],
    ],
    ids=["429", "500", "503", "rate-limit-event-before-content"],
)
async def test_failure_before_content_falls_back_to_the_next_route(
    tmp_path: Path, openai_fake: FakeOpenAI, openai_url: str, failure: Any
) -> None:
    openai_fake.enqueue("big", failure)
    openai_fake.enqueue("small", answer("Answer from the fallback."))
    runtime = runtime_for(settings_for(tmp_path, openai_url, ["small"]))
    assert runtime.model == "big"
    events = await collect(runtime, runtime_request(tmp_path))
    routes = [e for e in events if isinstance(e, Route)]
    assert [r.model for r in routes] == ["big", "small"]
    assert routes[-1].endpoint == openai_url.rstrip("/")
    status = next(e.text for e in events if isinstance(e, Status) and "unavailable" in e.text)
    assert status.startswith("big unavailable · trying small: ")
    assert text_of(events, Delta) == "Answer from the fallback."
    assert [r.model for r in openai_fake.requests] == ["big", "small"]


async def test_failure_after_content_is_pinned_and_never_falls_back(
    tmp_path: Path, openai_fake: FakeOpenAI, openai_url: str
) -> None:
    openai_fake.enqueue("big", [Content("The first half"), StreamError("worker crashed", code=500)])
    openai_fake.enqueue("small", answer("should never be asked"))
    runtime = runtime_for(settings_for(tmp_path, openai_url, ["small"]))
    events, error = await collect_until_error(runtime, runtime_request(tmp_path))
    assert text_of(events, Delta) == "The first half"
    assert error.before_content is False and "worker crashed" in error.message
    assert [r.model for r in openai_fake.requests] == ["big"]


async def test_a_wrong_request_stays_on_the_selected_route(
    tmp_path: Path, openai_fake: FakeOpenAI, openai_url: str
) -> None:
    openai_fake.enqueue("big", HttpError(400, "Invalid 'messages': too many"))
    openai_fake.enqueue("small", answer("hidden"))
    _, error = await collect_until_error(
        runtime_for(settings_for(tmp_path, openai_url, ["small"])), runtime_request(tmp_path)
    )
    assert "HTTP 400" in error.message
    assert [r.model for r in openai_fake.requests] == ["big"]


async def test_every_route_failing_reports_the_last_failure(
    tmp_path: Path, openai_fake: FakeOpenAI, openai_url: str
) -> None:
    openai_fake.enqueue("big", HttpError(503, "busy", "server_error"))
    dead = f"http://127.0.0.1:{unused_port()}/v1"
    settings = settings_for(tmp_path, openai_url, [{"model": "backup", "base_url": dead}])
    events, error = await collect_until_error(runtime_for(settings), runtime_request(tmp_path))
    assert "cannot reach" in error.message and "backup" in error.message
    assert any(
        isinstance(e, Status) and "big unavailable · trying backup" in e.text for e in events
    )


async def test_falls_back_across_providers_on_an_overloaded_event(
    tmp_path: Path, openai_fake: FakeOpenAI, openai_url: str, aiohttp_server: Any
) -> None:
    claude = FakeAnthropic(api_key="sk-ant-test-key-000000")
    claude_url = str((await aiohttp_server(claude.app())).make_url("")).rstrip("/")
    claude.enqueue("claude-big", [Start(), Ping(), ErrorEvent("overloaded_error", "Overloaded")])
    openai_fake.enqueue("local-qwen", answer("From the OpenAI-compatible fallback."))
    settings = make_settings(
        tmp_path,
        runtime="anthropic",
        model="claude-big",
        anthropic_base_url=claude_url,
        anthropic_api_key=Secret("sk-ant-test-key-000000"),
        openai_base_url=openai_url,
        openai_api_key=Secret(OPENAI_KEY),
        fallbacks=[{"runtime": "openai", "model": "local-qwen"}],
        tool_rounds=0,
    )
    events = await collect(runtime_for(settings), runtime_request(tmp_path))
    assert [r.model for r in events if isinstance(r, Route)] == ["claude-big", "local-qwen"]
    assert text_of(events, Delta) == "From the OpenAI-compatible fallback."


async def test_the_key_is_only_sent_to_its_own_base_url(
    tmp_path: Path, openai_fake: FakeOpenAI, openai_url: str, aiohttp_server: Any
) -> None:
    other = FakeOpenAI(api_key=None)  # e.g. a local vLLM that needs no key
    other_url = str((await aiohttp_server(other.app())).make_url("/v1"))
    openai_fake.enqueue("big", HttpError(429, "slow down", "requests"))
    other.enqueue("local", answer("local answer"))
    settings = settings_for(tmp_path, openai_url, [{"model": "local", "base_url": other_url}])
    await collect(runtime_for(settings), runtime_request(tmp_path))
    assert openai_fake.requests[0].headers["Authorization"] == f"Bearer {OPENAI_KEY}"
    assert "Authorization" not in other.requests[0].headers


def test_fallback_runtime_needs_a_route() -> None:
    with pytest.raises(ValueError):
        FallbackRuntime([])


def test_no_fallbacks_builds_the_plain_runtime(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, "http://127.0.0.1:1/v1", [])
    runtime = build_runtime("openai", settings, AgentConfig("default", "o/r", tmp_path, "openai"))
    assert not isinstance(runtime, FallbackRuntime) and runtime.name == "openai"
