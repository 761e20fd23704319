"""The OpenAI-compatible runtime against a local server speaking Chat Completions streaming."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.config_values import Secret
from bot.runtimes.base import ContextBudget, Delta, Route, Status, Thinking, Usage
from bot.runtimes.openai import OpenAIRuntime
from bot.runtimes.transport import Endpoint, UpstreamFailure
from tests.fakes.model_calls import (
    collect,
    collect_until_error,
    first_content_then_cancel,
    runtime_request,
    text_of,
    unused_port,
)
from tests.fakes.openai_server import (
    Content,
    Cut,
    Done,
    FakeOpenAI,
    Finish,
    Hold,
    HttpError,
    Raw,
    StreamError,
    ToolCallStep,
    UsageStep,
    answer,
    tool_round,
)

KEY = "sk-test-0123456789abcdef"
MODEL = "gpt-test"

RuntimeMaker = Callable[..., OpenAIRuntime]


@pytest.fixture
def fake() -> FakeOpenAI:
    return FakeOpenAI(api_key=KEY)


@pytest.fixture
async def make_runtime(fake: FakeOpenAI, aiohttp_server: Any) -> RuntimeMaker:
    server = await aiohttp_server(fake.app())
    base = str(server.make_url("/v1"))

    def make(**overrides: Any) -> OpenAIRuntime:
        endpoint = Endpoint(
            base_url=overrides.pop("base_url", base),
            api_key=Secret(overrides.pop("key", KEY)),
            read_timeout=overrides.pop("read_timeout", 5.0),
        )
        options: dict[str, Any] = {"model": MODEL, "context_tokens": 16_000, "tool_rounds": 4}
        options.update(overrides)
        return OpenAIRuntime(endpoint=endpoint, **options)

    return make


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text("# Sandbox\nThe deploy needle lives in docs/deploy.md.\n")
    (root / "docs" / "deploy.md").write_text("Deploys run from CI.\nneedle: blue-green\n")
    return root


async def test_reasoning_content_and_content_stream_as_thinking_and_delta_with_usage(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, answer("The build is green.", reasoning="Check CI first.", usage=(40, 7)))
    events = await collect(make_runtime(), runtime_request(checkout))
    assert events[0] == Route(model=MODEL, endpoint=make_runtime().endpoint.label)
    assert text_of(events, Thinking) == "Check CI first."
    assert text_of(events, Delta) == "The build is green."
    assert [e for e in events if isinstance(e, Usage)] == [Usage(input_tokens=40, output_tokens=7)]
    sent = fake.requests[0]
    assert sent.headers["Authorization"] == f"Bearer {KEY}"
    assert sent.headers["Content-Type"] == "application/json"
    assert sent.body["stream"] is True and sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"][0] == {"role": "system", "content": "You are Steelframe."}
    assert sent.body["messages"][-1] == {"role": "user", "content": "What does the README say?"}


async def test_reasoning_field_as_vllm_and_ollama_send_it(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, answer("Yes.", reasoning="Thinking in the other field.", field="reasoning"))
    events = await collect(make_runtime(), runtime_request(checkout))
    assert text_of(events, Thinking) == "Thinking in the other field."
    assert text_of(events, Delta) == "Yes."


async def test_inline_think_tags_cut_across_chunks_become_thinking(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    pieces = ["<thi", "nk>Compare the two", " branches.</th", "ink>\n\nMerge ", "main<", " first."]
    fake.enqueue(MODEL, [*(Content(p) for p in pieces), Finish(), UsageStep(5, 5), Done()])
    events = await collect(make_runtime(), runtime_request(checkout))
    assert text_of(events, Thinking) == "Compare the two branches."
    assert text_of(events, Delta) == "Merge main< first."


async def test_unknown_fields_comments_and_null_usage_are_ignored(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    odd = {
        "id": "x",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": "ok", "x_vendor": {"a": 1}}, "extra": 2}],
        "usage": None,
        "x_groq": {"id": "req_1"},
    }
    fake.enqueue(
        MODEL,
        [
            Raw(": OPENROUTER PROCESSING\n"),
            Raw(f"data: {json.dumps(odd)}\n"),
            Raw('data: {"choices": null, "usage": {"prompt_tokens": 3, "completion_tokens": 1}}\n'),
            Finish(),
            Done(),
        ],
    )
    events = await collect(make_runtime(), runtime_request(checkout))
    assert text_of(events, Delta) == "ok"
    assert Usage(input_tokens=3, output_tokens=1) in events


@pytest.mark.parametrize(
    ("chunk", "said"),
    [
        ({"choices": [{"delta": {"content": "x"}}]}, "missing required field `index`"),
        (
            {"choices": [{"index": 0, "delta": {"content": 5}}]},
            "Expected `str | null`, got `int` - at `$.choices[0].delta.content`",
        ),
        ({"choices": [], "usage": {"total_tokens": 3}}, "missing required field `prompt_tokens`"),
        ([1, 2], "Expected `object`, got `array`"),
        ("{not json", "sent a stream chunk that is not JSON"),
    ],
)
async def test_a_malformed_chunk_is_a_clear_error(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path, chunk: object, said: str
) -> None:
    line = chunk if isinstance(chunk, str) else json.dumps(chunk)
    fake.enqueue(MODEL, [Content("Half"), Raw(f"data: {line}\n"), Finish(), Done()])
    events, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert text_of(events, Delta) == "Half"
    assert isinstance(error, UpstreamFailure) and said in error.message
    assert error.message.startswith(
        f"the OpenAI-compatible endpoint {make_runtime().endpoint.label}"
    )
    assert error.before_content is False and error.retryable is False


async def test_a_tool_call_without_index_and_with_object_arguments_still_runs(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    call = {
        "id": "call_x",
        "type": "function",
        "function": {"name": "list_files", "arguments": {"path": "docs"}},
    }
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}
    fake.enqueue(
        MODEL,
        [Raw(f"data: {json.dumps(chunk)}\n"), Finish("tool_calls"), Done()],
        answer("Listed."),
    )
    events = await collect(make_runtime(), runtime_request(checkout))
    assert text_of(events, Delta) == "Listed."
    assistant, listing = fake.requests[1].body["messages"][-2:]
    assert assistant["tool_calls"] == [
        {
            "id": "call_x",
            "type": "function",
            "function": {"name": "list_files", "arguments": '{"path":"docs"}'},
        }
    ]
    assert listing["tool_call_id"] == "call_x" and "docs/deploy.md" in listing["content"]


async def test_mid_stream_error_after_content_is_an_error_not_silence(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, [Content("Half an ans"), StreamError("model worker crashed", code=500)])
    events, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert text_of(events, Delta) == "Half an ans"
    assert "mid-stream" in error.message and "model worker crashed" in error.message
    assert error.before_content is False


async def test_mid_stream_error_before_content_may_fall_back(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, [StreamError("Rate limit exceeded", type="rate_limit_exceeded", code=429)])
    _, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert isinstance(error, UpstreamFailure)
    assert error.before_content is True and error.retryable is True


async def test_stream_that_ends_without_done_or_finish_is_an_error(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, [Content("and then")])
    _, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert "ended before the answer was complete" in error.message
    assert error.before_content is False


async def test_connection_cut_mid_answer_is_a_clear_error(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, [Content("partial"), Cut()])
    _, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert "cut off mid-answer" in error.message and error.before_content is False


@pytest.mark.parametrize(
    ("script", "status", "words", "retryable"),
    [
        (HttpError(400, "max_tokens is too large"), 400, "max_tokens is too large", False),
        (HttpError(404, "no such route"), 404, "not found", False),
        (
            HttpError(429, "Rate limit reached", "requests", headers={"Retry-After": "1"}),
            429,
            "too many requests",
            True,
        ),
        (
            HttpError(500, "The server had an error", "server_error"),
            500,
            "server had an error",
            True,
        ),
        (HttpError(503, "overloaded", "server_error"), 503, "service unavailable", True),
    ],
)
async def test_http_errors_become_clear_messages(
    fake: FakeOpenAI,
    make_runtime: RuntimeMaker,
    checkout: Path,
    script: HttpError,
    status: int,
    words: str,
    retryable: bool,
) -> None:
    fake.enqueue(MODEL, script)
    _, error = await collect_until_error(make_runtime(), runtime_request(checkout))
    assert isinstance(error, UpstreamFailure)
    assert error.status == status and error.retryable is retryable
    assert f"HTTP {status}" in error.message and words in error.message.lower()
    assert "Traceback" not in error.message and KEY not in error.message


async def test_rejected_key_is_not_echoed_back_to_the_operator(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    wrong = "sk-proj-wrongkey9876543210"
    _, error = await collect_until_error(make_runtime(key=wrong), runtime_request(checkout))
    assert "HTTP 401" in error.message and "Incorrect API key" in error.message
    assert wrong not in error.message and "9876543210" not in error.message


async def test_connection_refused_names_the_endpoint(
    make_runtime: RuntimeMaker, checkout: Path
) -> None:
    runtime = make_runtime(base_url=f"http://127.0.0.1:{unused_port()}/v1")
    _, error = await collect_until_error(runtime, runtime_request(checkout))
    assert "cannot reach" in error.message and "connection refused" in error.message
    assert "127.0.0.1" in error.message
    assert isinstance(error, UpstreamFailure) and error.retryable


async def test_silence_past_the_read_timeout_is_an_error_and_hangs_up(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, [Hold()])
    _, error = await collect_until_error(make_runtime(read_timeout=0.2), runtime_request(checkout))
    assert "sent nothing for 0.2 s" in error.message
    async with asyncio.timeout(2):
        await fake.requests[0].client_gone.wait()


async def test_cancelling_the_stream_closes_the_upstream_connection(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, [Content("first words"), Hold()])
    seen = await first_content_then_cancel(make_runtime().stream(runtime_request(checkout)))
    assert text_of(seen, Delta) == "first words"
    async with asyncio.timeout(2):
        await fake.requests[0].client_gone.wait()
    assert not fake.requests[0].finished.is_set()


async def test_tool_calls_read_the_checkout_and_results_return_as_untrusted_data(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(
        MODEL,
        tool_round(("read_file", {"path": "README.md"}), ("search_text", {"query": "needle"})),
        answer("Deploys are blue-green (docs/deploy.md).", usage=(90, 11)),
    )
    events = await collect(make_runtime(), runtime_request(checkout))
    statuses = [e.text for e in events if isinstance(e, Status)]
    assert statuses == ["tool round 1/4 · read_file README.md, search_text needle"]
    assert text_of(events, Delta) == "Deploys are blue-green (docs/deploy.md)."
    assert [e for e in events if isinstance(e, Usage)] == [Usage(30, 12), Usage(90, 11)]
    first, second = (r.body for r in fake.requests)
    assert {t["function"]["name"] for t in first["tools"]} == {
        "list_files",
        "read_file",
        "search_text",
    }
    assert "tool_choice" not in first
    assistant, read, search = second["messages"][-3:]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["read_file", "search_text"]
    assert read["role"] == "tool" and read["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert read["content"].startswith('<untrusted-data source="tool:read_file" path="README.md">')
    assert "The deploy needle lives in docs/deploy.md." in read["content"]
    assert "docs/deploy.md:2: needle: blue-green" in search["content"]


async def test_arguments_streamed_in_fragments_are_joined_by_index(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    calls = [
        ToolCallStep("call_a", "list_files", {"path": "docs"}, index=0, fragments=5),
        ToolCallStep("call_b", "read_file", {"path": "docs/deploy.md", "max_lines": 1}, index=1),
    ]
    fake.enqueue(MODEL, [*calls, Finish("tool_calls"), Done()], answer("Done."))
    await collect(make_runtime(), runtime_request(checkout))
    listing, reading = fake.requests[1].body["messages"][-2:]
    assert "docs/deploy.md" in listing["content"]
    assert "Deploys run from CI." in reading["content"] and "blue-green" not in reading["content"]


async def test_last_allowed_round_forbids_more_tools_and_says_so(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, tool_round(("list_files", {})), answer("Here is the layout."))
    events = await collect(make_runtime(tool_rounds=1), runtime_request(checkout))
    assert text_of(events, Delta) == "Here is the layout."
    final = fake.requests[1].body
    assert final["tool_choice"] == "none"
    assert "last tool round" in final["messages"][-1]["content"]


async def test_a_model_that_ignores_the_round_limit_ends_with_an_error(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, tool_round(("list_files", {})), tool_round(("list_files", {})))
    _, error = await collect_until_error(make_runtime(tool_rounds=1), runtime_request(checkout))
    assert (
        "kept calling tools (the limit of 1 rounds)" in error.message
        and error.before_content is False
    )


async def test_path_escapes_requested_by_the_model_are_refused(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    (checkout / "escape").symlink_to(tmp_path / "secret.txt")
    attempts = ["../secret.txt", str(tmp_path / "secret.txt"), "escape", "docs/../../secret.txt"]
    fake.enqueue(
        MODEL,
        tool_round(*(("read_file", {"path": path}) for path in attempts)),
        answer("I cannot read those."),
    )
    await collect(make_runtime(), runtime_request(checkout))
    results = fake.requests[1].body["messages"][-len(attempts) :]
    assert all(r["content"].startswith("error: ") for r in results)
    assert not any("TOP SECRET" in r["content"] for r in results)


async def test_no_tools_are_offered_when_rounds_are_zero_or_no_checkout(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path, tmp_path: Path
) -> None:
    fake.enqueue(MODEL, answer("a"), answer("b"))
    await collect(make_runtime(tool_rounds=0), runtime_request(checkout))
    await collect(make_runtime(), runtime_request(tmp_path / "missing"))
    assert all("tools" not in r.body for r in fake.requests)


async def test_long_history_is_trimmed_to_the_context_window_with_a_status(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    history: list[tuple[Any, str]] = []
    for number in range(30):
        history += [
            ("user", f"question {number} " + "x" * 400),
            ("assistant", "answer " + "y" * 400),
        ]
    fake.enqueue(MODEL, answer("Short."))
    events = await collect(
        make_runtime(context_tokens=4_000, tool_rounds=0),
        runtime_request(checkout, "latest question", history=history),
    )
    budget = next(e for e in events if isinstance(e, ContextBudget))
    assert budget.trimmed and budget.before_messages == 61 and budget.after_messages < 61
    assert budget.after_tokens < budget.window < budget.before_tokens
    assert any(isinstance(e, Status) and e.text.startswith("history trimmed: 61 →") for e in events)
    sent = fake.requests[0].body["messages"]
    assert len(sent) == budget.after_messages + 1  # plus the system prompt
    assert sent[1]["role"] == "user" and sent[-1]["content"] == "latest question"
    assert "question 29" in sent[-3]["content"]  # the newest history survives


async def test_a_shared_session_reuses_the_connection_and_cancel_still_closes_it(
    fake: FakeOpenAI, make_runtime: RuntimeMaker, checkout: Path
) -> None:
    fake.enqueue(MODEL, answer("one"), answer("two"), [Content("three"), Hold()], answer("four"))
    async with aiohttp.ClientSession() as http:
        runtime = make_runtime(http=http)
        for _ in range(2):
            await collect(runtime, runtime_request(checkout))
        await first_content_then_cancel(runtime.stream(runtime_request(checkout)))
        async with asyncio.timeout(2):
            await fake.requests[2].client_gone.wait()
        events = await collect(runtime, runtime_request(checkout))
        assert not http.closed
    assert text_of(events, Delta) == "four"
    first, second, cancelled, after = (r.peer for r in fake.requests)
    assert first == second == cancelled  # kept alive across turns
    assert after != cancelled  # the cancelled connection was closed, not reused
