"""The Anthropic runtime: the Messages API with `"stream": true`.

Wire format (POST {base}/v1/messages, `x-api-key`, `anthropic-version`): SSE `event:`/`data:`
pairs. `message_start` (input usage), then per content block `content_block_start`,
`content_block_delta`s (`text_delta` -> delta, `thinking_delta` -> thinking,
`signature_delta` kept only to hand the thinking block back, `input_json_delta` for a
`tool_use` block's input), `content_block_stop`; then `message_delta` (stop reason,
cumulative output usage) and `message_stop`. `ping` may come anywhere; an `error` event
(e.g. `overloaded_error`) can arrive after the 200; unknown events are ignored, as
Anthropic's versioning policy asks.
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
from bot.runtimes.tools import ToolCall, ToolResult, ToolSpec
from bot.runtimes.transport import (
    UpstreamFailure,
    clip,
    error_detail,
    redact,
)

log = logging.getLogger(__name__)
API_VERSION = "2023-06-01"
_RETRYABLE_ERRORS = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)


@dataclass
class _Message:
    """One streamed message: its content blocks by index, usage and how it stopped."""

    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    done: bool = False

    @property
    def text(self) -> str:
        return "".join(
            b.get("text", "") for _, b in sorted(self.blocks.items()) if b["type"] == "text"
        )

    def tool_calls(self) -> list[ToolCall]:
        return [
            ToolCall(id=b.get("id", ""), name=b.get("name", ""), arguments=b.get("_json") or "{}")
            for _, b in sorted(self.blocks.items())
            if b["type"] == "tool_use"
        ]

    def history_content(self) -> list[dict[str, Any]]:
        """The assistant content to send back with tool results: thinking blocks unchanged
        (the API checks their signatures), non-empty text, tool_use with parsed input."""
        content: list[dict[str, Any]] = []
        for _, block in sorted(self.blocks.items()):
            kind = block["type"]
            if kind == "thinking":
                content.append(
                    {
                        "type": "thinking",
                        "thinking": block.get("thinking", ""),
                        "signature": block.get("signature", ""),
                    }
                )
            elif kind == "redacted_thinking":
                content.append({"type": "redacted_thinking", "data": block.get("data", "")})
            elif kind == "text" and block.get("text"):
                content.append({"type": "text", "text": block["text"]})
            elif kind == "tool_use":
                content.append(
                    {
                        "type": "tool_use",
                        "id": block.get("id", ""),
                        "name": block.get("name", ""),
                        "input": _input(block),
                    }
                )
        return content


class _Conversation(WireConversation[_Message]):
    """One turn's messages on the Messages API wire (bot.runtimes.rounds drives it)."""

    def outcome(self, round_number: int) -> RoundOutcome:
        # Only a `tool_use` stop asks for tools; other stops end the turn with its answer.
        calls = self.state.tool_calls() if self.state.stop_reason == "tool_use" else []
        usage = Usage(input_tokens=self.state.input_tokens, output_tokens=self.state.output_tokens)
        return RoundOutcome(text=self.state.text, calls=calls, usage=usage)

    def record(self, outcome: RoundOutcome, results: list[ToolResult]) -> None:
        self.turn.messages.append({"role": "assistant", "content": self.state.history_content()})
        self.turn.messages.append({"role": "user", "content": [_tool_result(r) for r in results]})


class AnthropicRuntime(HostedRuntime):
    name = "anthropic"
    PATH = "v1/messages"
    PROVIDER = "the Anthropic endpoint"

    def messages(self, request: RuntimeRequest, fitted: Fitted) -> Messages:
        # The API refuses empty text; a stored turn can be empty (a reply that was all trailer).
        return [
            {"role": m.role, "content": m.content} for m in fitted.messages if m.content.strip()
        ]

    def conversation(self, turn: WireTurn[Any]) -> _Conversation:
        return _Conversation(turn, _Message)

    def body(self, turn: WireTurn[Any], *, final: bool) -> dict[str, Any]:
        request, tools = turn.request, turn.tools
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_output_tokens + self.thinking_tokens,
            "system": request.system,
            "messages": turn.messages,
            "stream": True,
        }
        if self.thinking_tokens:
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_tokens}
        if tools is not None:
            body["tools"] = [_tool_schema(spec) for spec in tools.specs]
            if final:
                body["tool_choice"] = {"type": "none"}
        return body

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "Accept": "text/event-stream"}
        if self.endpoint.api_key:
            headers["x-api-key"] = self.endpoint.api_key.reveal()
        return headers

    async def read(
        self, response: aiohttp.ClientResponse, state: _Message
    ) -> AsyncGenerator[RuntimeEvent, None]:
        async for sse in server_events(response.content):
            try:
                data = json.loads(sse.data)
            except ValueError:
                raise UpstreamFailure(
                    f"{self.where} sent a stream event that is not JSON"
                ) from None
            if not isinstance(data, dict):
                continue
            kind = data.get("type") or sse.event
            if kind == "error":
                raise self._stream_error(data)
            if kind == "message_stop":
                state.done = True
                break
            for event in _apply(kind, data, state):
                yield event
        if not state.done:
            raise UpstreamFailure(
                f"the stream from {self.where} ended before the answer was complete", retryable=True
            )
        if state.stop_reason == "max_tokens":
            yield Status("the answer reached the output token limit")
        elif state.stop_reason == "refusal":
            yield Status("the model declined to answer")

    def _stream_error(self, data: dict[str, Any]) -> UpstreamFailure:
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        kind = str(error.get("type", "")) if error else ""
        detail = clip(redact(error_detail(data) or "unknown error", self.endpoint.secrets()))
        return UpstreamFailure(
            f"{self.where} reported an error mid-stream: {detail}",
            retryable=kind in _RETRYABLE_ERRORS,
        )


def _apply(kind: str, data: dict[str, Any], state: _Message) -> list[RuntimeEvent]:
    """Fold one event into the message state; the thinking/delta events it produces."""
    if kind == "message_start":
        message = data.get("message") or {}
        _usage(state, message.get("usage") if isinstance(message, dict) else None)
    elif kind == "content_block_start":
        block = data.get("content_block")
        if isinstance(block, dict) and isinstance(block.get("type"), str):
            state.blocks[_index(data)] = dict(block)
            if block["type"] == "text" and block.get("text"):
                return [Delta(block["text"])]
    elif kind == "content_block_delta":
        return _delta(state.blocks.get(_index(data)), data.get("delta"))
    elif kind == "message_delta":
        delta = data.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            state.stop_reason = str(delta["stop_reason"])
        _usage(state, data.get("usage"))
    return []  # ping, content_block_stop and event types added later carry nothing to show


def _delta(block: dict[str, Any] | None, delta: Any) -> list[RuntimeEvent]:
    if block is None or not isinstance(delta, dict):
        return []
    kind = delta.get("type")
    if kind == "text_delta" and isinstance(delta.get("text"), str):
        block["text"] = block.get("text", "") + delta["text"]
        return [Delta(delta["text"])] if delta["text"] else []
    if kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
        block["thinking"] = block.get("thinking", "") + delta["thinking"]
        return [Thinking(delta["thinking"])] if delta["thinking"] else []
    if kind == "signature_delta" and isinstance(delta.get("signature"), str):
        block["signature"] = block.get("signature", "") + delta["signature"]
    elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
        block["_json"] = block.get("_json", "") + delta["partial_json"]
    return []


def _usage(state: _Message, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    inputs = [
        usage.get(k)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    if any(isinstance(v, int) for v in inputs):
        state.input_tokens = sum(v for v in inputs if isinstance(v, int))
    if isinstance(usage.get("output_tokens"), int):
        state.output_tokens = usage["output_tokens"]  # cumulative in message_delta


def _index(data: dict[str, Any]) -> int:
    index = data.get("index")
    return index if isinstance(index, int) else 0


def _input(block: dict[str, Any]) -> dict[str, Any]:
    raw = block.get("_json")
    if not raw:
        start = block.get("input")
        return start if isinstance(start, dict) else {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _tool_schema(spec: ToolSpec) -> dict[str, Any]:
    return {
        "name": spec.name.value,
        "description": spec.description,
        "input_schema": spec.parameters,
    }


def _tool_result(result: ToolResult) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": result.call.id,
        "content": result.content,
    }
    if not result.ok:
        block["is_error"] = True
    return block
