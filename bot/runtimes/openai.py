"""The OpenAI-compatible runtime: Chat Completions streaming, as OpenAI, vLLM, Ollama,
llama.cpp's server and OpenRouter speak it.

Wire format (POST {base}/chat/completions with `"stream": true`): `data: {chunk}` lines,
each chunk `{"choices": [{"index", "delta", "finish_reason"}], "usage"?}`, ended by
`data: [DONE]`. Reasoning arrives in `delta.reasoning_content` (DeepSeek, llama.cpp) or
`delta.reasoning` (vLLM, Ollama, OpenRouter), or inline as `<think>` tags in `content`. With
`stream_options.include_usage` a last chunk with empty `choices` carries `usage`. A server
that fails after its 200 sends `data: {"error": {...}}` (or `finish_reason: "error"`).
Tool calls stream as `delta.tool_calls[i]` fragments joined by `index`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bot.runtimes.base import Delta, RuntimeEvent, RuntimeRequest, Status, Thinking, Usage
from bot.runtimes.budget import Fitted
from bot.runtimes.eventstream import server_events
from bot.runtimes.rounds import HostedRuntime, Messages, RoundOutcome, WireConversation, WireTurn
from bot.runtimes.thinktags import ThinkTagSplitter
from bot.runtimes.tools import ToolCall, ToolResult, ToolSpec
from bot.runtimes.transport import (
    UpstreamFailure,
    clip,
    error_detail,
    redact,
)

log = logging.getLogger(__name__)
# Mid-stream error codes/types that mean "busy or broken right now", not "bad request".
_RETRYABLE_KINDS = ("rate_limit", "overloaded", "server_error", "timeout", "unavailable")


@dataclass
class _Round:
    """What one streamed completion left behind."""

    text: str = ""
    finish: str | None = None
    done: bool = False
    usage: tuple[int, int] | None = None
    calls: dict[int, dict[str, str]] = field(default_factory=dict)

    def tool_calls(self, round_number: int) -> list[ToolCall]:
        return [
            ToolCall(
                id=entry["id"] or f"call_{round_number}_{index}",
                name=entry["name"],
                arguments=entry["arguments"],
            )
            for index, entry in sorted(self.calls.items())
        ]


class _Conversation(WireConversation[_Round]):
    """One turn's messages on the Chat Completions wire (bot.runtimes.rounds drives it)."""

    def outcome(self, round_number: int) -> RoundOutcome:
        usage = self.state.usage
        return RoundOutcome(
            text=self.state.text,
            calls=self.state.tool_calls(round_number),
            usage=None if usage is None else Usage(input_tokens=usage[0], output_tokens=usage[1]),
        )

    def record(self, outcome: RoundOutcome, results: list[ToolResult]) -> None:
        self.turn.messages.append(_assistant_with_calls(outcome.text, outcome.calls))
        self.turn.messages.extend(_tool_message(result) for result in results)


class OpenAIRuntime(HostedRuntime):
    """Reasoning, where a server has it, needs no token budget: `thinking_tokens` stays 0."""

    name = "openai"
    PATH = "chat/completions"
    PROVIDER = "the OpenAI-compatible endpoint"

    def messages(self, request: RuntimeRequest, fitted: Fitted) -> Messages:
        messages: Messages = [{"role": "system", "content": request.system}]
        return messages + [{"role": m.role, "content": m.content} for m in fitted.messages]

    def conversation(self, turn: WireTurn[Any]) -> _Conversation:
        return _Conversation(turn, _Round)

    def body(self, turn: WireTurn[Any], *, final: bool) -> dict[str, Any]:
        request, tools = turn.request, turn.tools
        body: dict[str, Any] = {
            "model": self.model,
            "messages": turn.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            # `max_tokens`, not `max_completion_tokens`: every compatible server reads it.
            "max_tokens": request.max_output_tokens,
        }
        if tools is not None:
            body["tools"] = [_tool_schema(spec) for spec in tools.specs]
            if final:
                body["tool_choice"] = "none"
        return body

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key.reveal()}"
        return headers

    async def read(
        self, response: aiohttp.ClientResponse, state: _Round
    ) -> AsyncGenerator[RuntimeEvent, None]:
        splitter = ThinkTagSplitter()
        async for sse in server_events(response.content):
            data = sse.data.strip()
            if data == "[DONE]":
                state.done = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                raise UpstreamFailure(
                    f"{self.where} sent a stream chunk that is not JSON"
                ) from None
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                raise self._stream_error(chunk)
            usage = chunk.get("usage")
            if isinstance(usage, dict):  # cumulative where servers repeat it: keep the last
                state.usage = (
                    _int(usage.get("prompt_tokens")),
                    _int(usage.get("completion_tokens")),
                )
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                for event in self._choice(choice, state, splitter):
                    yield event
        for thinking, text in splitter.flush():
            state.text += "" if thinking else text
            yield Thinking(text) if thinking else Delta(text)
        if not state.done and state.finish is None:
            raise UpstreamFailure(
                f"the stream from {self.where} ended before the answer was complete",
                retryable=True,
            )
        if state.finish == "length":
            yield Status("the answer reached the output token limit")

    def _choice(
        self, choice: dict[str, Any], state: _Round, splitter: ThinkTagSplitter
    ) -> list[RuntimeEvent]:
        events: list[RuntimeEvent] = []
        delta = choice.get("delta")
        if isinstance(delta, dict):
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                events.append(Thinking(reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                for thinking, text in splitter.feed(content):
                    state.text += "" if thinking else text
                    events.append(Thinking(text) if thinking else Delta(text))
            for position, fragment in enumerate(delta.get("tool_calls") or ()):
                if isinstance(fragment, dict):
                    _merge_call(state.calls, position, fragment)
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            if finish == "error":
                raise self._stream_error(choice)
            state.finish = finish
        return events

    def _stream_error(self, holder: dict[str, Any]) -> UpstreamFailure:
        error = holder.get("error")
        detail = error_detail({"error": error}) if error else "the stream reported an error"
        kind = json.dumps(error).lower() if error else ""
        retryable = any(word in kind for word in _RETRYABLE_KINDS) or any(
            f'"code": {code}' in kind for code in (429, 500, 502, 503, 504)
        )
        shown = clip(redact(detail, self.endpoint.secrets()))
        return UpstreamFailure(
            f"{self.where} reported an error mid-stream: {shown}", retryable=retryable
        )


def _merge_call(calls: dict[int, dict[str, str]], position: int, fragment: dict[str, Any]) -> None:
    index = fragment.get("index", position)
    entry = calls.setdefault(
        index if isinstance(index, int) else position, {"id": "", "name": "", "arguments": ""}
    )
    if isinstance(fragment.get("id"), str) and fragment["id"]:
        entry["id"] = fragment["id"]
    function = fragment.get("function")
    if not isinstance(function, dict):
        return
    name = function.get("name")
    if isinstance(name, str) and name and name != entry["name"]:
        entry["name"] += name
    arguments = function.get("arguments")
    if isinstance(arguments, dict):  # a few servers send the object, not its JSON text
        entry["arguments"] = json.dumps(arguments)
    elif isinstance(arguments, str):
        entry["arguments"] += arguments


def _tool_schema(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name.value,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def _assistant_with_calls(text: str, calls: list[ToolCall]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments or "{}"},
            }
            for call in calls
        ],
    }


def _tool_message(result: ToolResult) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": result.call.id, "content": result.content}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
