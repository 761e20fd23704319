"""The Anthropic runtime against a local server speaking Messages API streaming events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.config_values import Secret
from bot.runtimes.anthropic import API_VERSION, AnthropicRuntime
from bot.runtimes.base import Delta, Route, Status, Thinking, Usage
from bot.runtimes.transport import Endpoint, UpstreamFailure
from tests.fakes.anthropic_server import (
    Cut,
    ErrorEvent,
    FakeAnthropic,
    Hold,
    HttpError,
    Ping,
    RawEvent,
    RedactedThinkingBlock,
    Start,
    Stop,
    TextBlock,
    ToolUseBlock,
    Unknown,
    answer,
    tool_round,
)
from tests.fakes.model_calls import (
    collect,
    collect_until_error,
    first_content_then_cancel,
    runtime_request,
    text_of,
    unused_port,
)

KEY = "sk-ant-api03-testkey0123456789"
MODEL = "claude-test"
RuntimeMaker = Callable[..., AnthropicRuntime]


@pytest.fixture
def fake() -> FakeAnthropic:
    return FakeAnthropic(api_key=KEY)


@pytest.fixture
async def make_runtime(fake: FakeAnthropic, aiohttp_server: Any) -> RuntimeMaker:
    server = await aiohttp_server(fake.app())
    base = str(server.make_url("")).rstrip("/")

    def make(**overrides: Any) -> AnthropicRuntime:
        endpoint = Endpoint(
            base_url=overrides.pop("base_url", base),
            api_key=Secret(overrides.pop("key", KEY)),
            read_timeout=overrides.pop("read_timeout", 5.0),
        )
        options: dict[str, Any] = {"model": MODEL, "context_tokens": 16_000, "tool_rounds": 4}
        options.update(overrides)
        return AnthropicRuntime(endpoint=endpoint, **options)

    return make


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 'steelframe'\n")
    return root


async def test_thinking_and_text_deltas_with_usage_from_start_and_delta(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(
        MODEL,
        answer(
            "Use the sandbox.",
            thinking="The operator asks about setup.",
            input_tokens=52,
            output_tokens=19,
        ),
    )
    events = await collect(make_runtime(), runtime_request(checkout))
    assert isinstance(events[0], Route) and events[0].model == MODEL
    assert text_of(events, Thinking) == "The operator asks about setup."
    assert text_of(events, Delta) == "Use the sandbox."
    assert [e for e in events if isinstance(e, Usage)] == [Usage(input_tokens=52, output_tokens=19)]
    sent = fake.requests[0]
    assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == API_VERSION
    assert sent.headers["Content-Type"] == "application/json"
    assert sent.body["system"] == "You are Steelframe." and sent.body["stream"] is True
    assert sent.body["messages"] == [{"role": "user", "content": "What does the README say?"}]


async def test_pings_anywhere_and_unknown_events_are_ignored(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(
        MODEL,
        [
            Ping(),
            Start(10),
            Ping(),
            Unknown(),
            TextBlock("One", 1),
            Ping(),
            TextBlock(" two", 1),
            Unknown(),
            Stop("end_turn", 3),
            Ping(),
        ],
    )
    events = await collect(make_runtime(), runtime_request(checkout))
    assert text_of(events, Delta) == "One two"
    assert Usage(10, 3) in events


def _event(name: str, **fields: Any) -> RawEvent:
    return RawEvent(name, json.dumps({"type": name, **fields}))


async def test_fields_blocks_and_deltas_a_later_api_adds_are_ignored(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    citation = {"type": "char_location", "cited_text": "x", "document_index": 0}
    fake.enqueue(
        MODEL,
        [
            Start(12),
            _event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
            _event("content_block_delta", index=0, delta={"type": "citations_delta", **citation}),
            _event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Cited."}),
            _event("content_block_stop", index=0, x_added_later={"a": 1}),
            _event(
                "content_block_start",
                index=1,
                content_block={"type": "server_tool_use", "id": "srvtoolu_1", "name": "web"},
            ),
            _event("content_block_delta", index=1, delta={"type": "input_json_delta", "bad": 1}),
            _event("content_block_stop", index=1),
            _event(
                "message_delta",
                delta={"stop_reason": "end_turn", "stop_sequence": None, "container": None},
                usage={"output_tokens": 4, "server_tool_use": {"web_search_requests": 1}},
            ),
            _event("message_stop"),
        ],
    )
    events = await collect(make_runtime(), runtime_request(checkout))
    assert text_of(events, Delta) == "Cited."
    assert Usage(12, 4) in events


@pytest.mark.parametrize(
    ("event", "said"),
    [
        (
            _event("content_block_delta", index="0", delta={"type": "text_delta", "text": "x"}),
            "Expected `int`, got `str` - at `$.index`",
        ),
        (_event("message_delta", delta={}), "missing required field `usage`"),
        (
            _event("content_block_delta", index=0, delta={"type": "text_delta", "text": 5}),
            "Expected `str`, got `int` - at `$.text` (in `$.delta`)",
        ),
        (
            RawEvent("content_block_delta", '{"index": 0, "delta": {}}'),
            "missing required field `type`",
        ),
        (_event("error", error="Overloaded"), "Expected `object`, got `str` - at `$.error`"),
        (RawEvent("message_delta", "{not json"), "sent a stream event that is not JSON"),
    ],
)
async def test_a_malformed_event_of_a_known_type_is_a_clear_error(
    fake: FakeAnthropic,
    make_runtime: RuntimeMaker,
    checkout: Path,
    event: RawEvent,
    said: str,
) -> None:
    fake.enqueue(MODEL, [Start(), TextBlock("Half", 1), event, Stop()])
    events, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert text_of(events, Delta) == "Half"
    assert isinstance(error, UpstreamFailure) and said in error.message
    assert error.message.startswith(f"the Anthropic endpoint {make_runtime().endpoint.label}")
    assert error.before_content is False and error.retryable is False


async def test_overloaded_error_event_before_content_is_retryable(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, [Start(), Ping(), ErrorEvent("overloaded_error", "Overloaded")])
    _, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert isinstance(error, UpstreamFailure)
    assert "mid-stream" in error.message and "overloaded_error: Overloaded" in error.message
    assert error.retryable and error.before_content


async def test_error_event_after_text_is_pinned_to_the_route(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(
        MODEL,
        [Start(), TextBlock("Partial answ", 1), ErrorEvent("api_error", "Internal server error")],
    )
    events, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert text_of(events, Delta) == "Partial answ"
    assert error.before_content is False and "Internal server error" in error.message


async def test_stream_without_message_stop_is_an_error(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, [Start(), TextBlock("and", 1)])
    _, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert "ended before the answer was complete" in error.message


async def test_connection_cut_is_a_clear_error(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, [Start(), Cut()])
    _, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert "cut off mid-answer" in error.message and error.before_content


@pytest.mark.parametrize(
    ("script", "status", "retryable"),
    [
        (
            HttpError(
                400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
            ),
            400,
            False,
        ),
        (
            HttpError(
                429, "rate_limit_error", "Number of request tokens has exceeded your rate limit"
            ),
            429,
            True,
        ),
        (HttpError(500, "api_error", "Internal server error"), 500, True),
        (HttpError(529, "overloaded_error", "Overloaded"), 529, True),
    ],
)
async def test_http_errors_carry_the_providers_message(
    fake: FakeAnthropic,
    make_runtime: RuntimeMaker,
    checkout: Path,
    script: HttpError,
    status: int,
    retryable: bool,
) -> None:
    fake.enqueue(MODEL, script)
    _, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert (
        isinstance(error, UpstreamFailure)
        and error.status == status
        and error.retryable is retryable
    )
    assert f"HTTP {status}" in error.message and script.message in error.message
    assert f"{script.type}:" in error.message


async def test_a_wrong_key_is_a_401_without_the_key(
    make_runtime: RuntimeMaker, checkout: Path
) -> None:
    wrong = "sk-ant-api03-wrong0000000000"
    _, error = await collect_until_error(make_runtime(key=wrong), runtime_request(checkout))
    assert "HTTP 401" in error.message and "authentication_error" in error.message
    assert wrong not in error.message


async def test_connection_refused_and_timeout(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    refused = make_runtime(base_url=f"http://127.0.0.1:{unused_port()}")
    _, error = await collect_until_error(refused, runtime_request(checkout))
    assert "connection refused" in error.message
    fake.enqueue(MODEL, [Start(), Hold()])
    _, error = await collect_until_error(make_runtime(read_timeout=0.2), runtime_request(checkout))
    assert "sent nothing for 0.2 s" in error.message


async def test_cancelling_the_stream_closes_the_upstream_connection(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, [Start(), TextBlock("Hello", 1), Hold()])
    seen = await first_content_then_cancel(make_runtime().stream(runtime_request(checkout)))
    assert text_of(seen, Delta) == "Hello"
    async with asyncio.timeout(2):
        await fake.requests[0].client_gone.wait()


async def test_tool_use_round_trip_hands_back_signed_thinking_and_untrusted_results(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(
        MODEL,
        tool_round(
            ("read_file", {"path": "src/app.py"}), text="Let me look.", thinking="Need the source."
        ),
        answer("main() returns 'steelframe'.", thinking="Now I know."),
    )
    events = await collect(make_runtime(thinking_tokens=1024), runtime_request(checkout))
    assert text_of(events, Thinking) == "Need the source.Now I know."
    assert text_of(events, Delta) == "Let me look.\n\nmain() returns 'steelframe'."
    assert any(
        isinstance(e, Status) and e.text == "tool round 1/4 · read_file src/app.py" for e in events
    )
    first, second = (r.body for r in fake.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert first["max_tokens"] == 2048 + 1024
    assert {t["name"] for t in first["tools"]} == {"list_files", "read_file", "search_text"}
    assistant, results = second["messages"][-2:]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use"]
    assert assistant["content"][0]["signature"] in fake.signatures
    assert assistant["content"][2]["input"] == {"path": "src/app.py"}
    (result,) = results["content"]
    assert (
        result["type"] == "tool_result" and result["tool_use_id"] == assistant["content"][2]["id"]
    )
    assert result["content"].startswith(
        '<untrusted-data source="tool:read_file" path="src/app.py">'
    )
    assert "return 'steelframe'" in result["content"]


async def test_a_tool_use_whose_input_comes_whole_in_its_start_is_called_with_it(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    block = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "read_file",
        "input": {"path": "src/app.py"},
    }
    fake.enqueue(
        MODEL,
        [
            Start(9),
            _event("content_block_start", index=0, content_block=block),
            _event("content_block_stop", index=0),
            _event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 3}),
            _event("message_stop"),
        ],
        answer("It returns 'steelframe'."),
    )
    events = await collect(make_runtime(), runtime_request(checkout))
    assert any(
        isinstance(e, Status) and e.text == "tool round 1/4 · read_file src/app.py" for e in events
    )
    (result,) = fake.requests[1].body["messages"][-1]["content"]
    assert "return 'steelframe'" in result["content"]  # the file was read, not a refused path


async def test_redacted_thinking_is_handed_back_unchanged(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(
        MODEL,
        [
            Start(),
            RedactedThinkingBlock(),
            ToolUseBlock("toolu_1", "list_files", {}),
            Stop("tool_use"),
        ],
        answer("Listed."),
    )
    await collect(make_runtime(thinking_tokens=2000), runtime_request(checkout))
    assistant = fake.requests[1].body["messages"][-2]
    assert assistant["content"][0] == {
        "type": "redacted_thinking",
        "data": RedactedThinkingBlock().data,
    }


async def test_refused_tool_paths_come_back_as_errors(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(
        MODEL,
        tool_round(
            ("read_file", {"path": "/etc/passwd"}),
            ("list_files", {"path": "../.."}),
            ("read_file", {"path": ".git/config"}),
        ),
        answer("Those are off limits."),
    )
    await collect(make_runtime(), runtime_request(checkout))
    results = fake.requests[1].body["messages"][-1]["content"]
    assert [r["is_error"] for r in results] == [True, True, True]
    assert "root:" not in str(results)


async def test_last_round_sets_tool_choice_none(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, tool_round(("list_files", {})), answer("Done."))
    await collect(make_runtime(tool_rounds=1), runtime_request(checkout))
    assert fake.requests[1].body["tool_choice"] == {"type": "none"}
    assert "tool_choice" not in fake.requests[0].body


async def test_empty_stored_turns_are_not_sent_as_empty_text(
    fake: FakeAnthropic, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, answer("Sure."))
    history: list[tuple[Any, str]] = [("user", "file it"), ("assistant", ""), ("user", "and?")]
    events = await collect(make_runtime(), runtime_request(checkout, "again", history=history))
    assert text_of(events, Delta) == "Sure."
    sent = fake.requests[0].body["messages"]
    assert [m["content"] for m in sent] == ["file it", "and?", "again"]
