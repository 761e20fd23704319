"""The OpenAI-compatible runtime: Chat Completions streaming, as OpenAI, vLLM, Ollama,
llama.cpp's server and OpenRouter speak it.

Wire format (POST {base}/chat/completions with `"stream": true`): `data: {chunk}` lines,
each chunk `{"choices": [{"index", "delta", "finish_reason"}], "usage"?}`, ended by
`data: [DONE]`. Reasoning arrives in `delta.reasoning_content` (DeepSeek, llama.cpp) or
`delta.reasoning` (vLLM, Ollama, OpenRouter), or inline as `<think>` tags in `content`. With
`stream_options.include_usage` a last chunk with empty `choices` carries `usage`. A server
that fails after its 200 sends `data: {"error": {...}}` (or `finish_reason: "error"`).
Tool calls stream as `delta.tool_calls[i]` fragments joined by `index`. The wire's shapes
are Structs in bot.runtimes.openai_wire.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

import aiohttp
import msgspec
from msgspec import UNSET

from bot.runtimes.base import Delta, RuntimeEvent, RuntimeRequest, Status, Thinking, Usage
from bot.runtimes.budget import Fitted
from bot.runtimes.eventstream import server_events
from bot.runtimes.openai_wire import (
    CHUNKS,
    AssistantMessage,
    ChatCompletionsRequest,
    Choice,
    FunctionCall,
    FunctionDefinition,
    FunctionTool,
    MessageParam,
    StreamError,
    StreamOptions,
    SystemMessage,
    ToolCallDelta,
    ToolCallParam,
    ToolMessage,
    UserMessage,
)
from bot.runtimes.rounds import HostedRuntime, RoundOutcome, WireConversation, WireTurn
from bot.runtimes.thinktags import ThinkTagSplitter
from bot.runtimes.tools import ToolCall, ToolResult, ToolSpec
from bot.runtimes.transport import (
    UpstreamFailure,
    clip,
    error_text,
    malformed_frame,
    redact,
)

log = logging.getLogger(__name__)
# Mid-stream error codes/types that mean "busy or broken right now", not "bad request".
_RETRYABLE_KINDS = ("rate_limit", "overloaded", "server_error", "timeout", "unavailable")
_RETRYABLE_CODES = frozenset({429, 500, 502, 503, 504})


@dataclass
class _CallParts:
    """One tool call as its fragments arrive."""

    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _Round:
    """What one streamed completion left behind."""

    text: str = ""
    finish: str | None = None
    done: bool = False
    usage: tuple[int, int] | None = None
    calls: dict[int, _CallParts] = field(default_factory=dict)

    def tool_calls(self, round_number: int) -> list[ToolCall]:
        return [
            ToolCall(
                id=parts.id or f"call_{round_number}_{index}",
                name=parts.name,
                arguments=parts.arguments,
            )
            for index, parts in sorted(self.calls.items())
        ]


class _Conversation(WireConversation[MessageParam, _Round]):
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


class OpenAIRuntime(HostedRuntime[MessageParam, _Round]):
    """Reasoning, where a server has it, needs no token budget: `thinking_tokens` stays 0."""

    name = "openai"
    PATH = "chat/completions"
    PROVIDER = "the OpenAI-compatible endpoint"

    def messages(self, request: RuntimeRequest, fitted: Fitted) -> list[MessageParam]:
        messages: list[MessageParam] = [SystemMessage(request.system)]
        for m in fitted.messages:
            if m.role == "user":
                messages.append(UserMessage(m.content))
            elif m.role == "assistant":
                messages.append(AssistantMessage(m.content))
            else:
                messages.append(SystemMessage(m.content))
        return messages

    def conversation(self, turn: WireTurn[MessageParam, _Round]) -> _Conversation:
        return _Conversation(turn, _Round)

    def body(self, turn: WireTurn[MessageParam, _Round], *, final: bool) -> ChatCompletionsRequest:
        request, tools = turn.request, turn.tools
        return ChatCompletionsRequest(
            model=self.model,
            messages=turn.messages,
            stream=True,
            stream_options=StreamOptions(include_usage=True),
            max_tokens=request.max_output_tokens,
            tools=UNSET if tools is None else [_tool_schema(spec) for spec in tools.specs],
            tool_choice="none" if tools is not None and final else UNSET,
        )

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
                chunk = CHUNKS.decode(data)
            except msgspec.DecodeError as exc:
                raise malformed_frame(self.where, exc, frame="stream chunk") from None
            if chunk.error:
                raise self._stream_error(chunk.error)
            if chunk.usage is not None:  # cumulative where servers repeat it: keep the last
                state.usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
            for choice in chunk.choices or ():
                if choice.index != 0:
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
        self, choice: Choice, state: _Round, splitter: ThinkTagSplitter
    ) -> list[RuntimeEvent]:
        events: list[RuntimeEvent] = []
        delta = choice.delta
        reasoning = delta.reasoning_content or delta.reasoning
        if reasoning:
            events.append(Thinking(reasoning))
        if delta.content:
            for thinking, text in splitter.feed(delta.content):
                state.text += "" if thinking else text
                events.append(Thinking(text) if thinking else Delta(text))
        for position, fragment in enumerate(delta.tool_calls or ()):
            _merge_call(state.calls, position, fragment)
        if choice.finish_reason:
            if choice.finish_reason == "error":
                raise self._stream_error(choice.error)
            state.finish = choice.finish_reason
        return events

    def _stream_error(self, error: StreamError | str | None) -> UpstreamFailure:
        if isinstance(error, StreamError):
            detail = error_text(error.type or error.code, error.message)
            words = " ".join(str(part) for part in (error.type, error.code, error.message))
            retryable = error.code in _RETRYABLE_CODES
        else:
            detail = words = error or ""
            retryable = False
        retryable = retryable or any(word in words.lower() for word in _RETRYABLE_KINDS)
        shown = clip(redact(detail or "the stream reported an error", self.endpoint.secrets()))
        return UpstreamFailure(
            f"{self.where} reported an error mid-stream: {shown}", retryable=retryable
        )


def _merge_call(calls: dict[int, _CallParts], position: int, fragment: ToolCallDelta) -> None:
    parts = calls.setdefault(position if fragment.index is None else fragment.index, _CallParts())
    if fragment.id:
        parts.id = fragment.id
    function = fragment.function
    if function is None:
        return
    if function.name and function.name != parts.name:
        parts.name += function.name
    if isinstance(function.arguments, dict):  # a few servers send the object, not its text
        parts.arguments = msgspec.json.encode(function.arguments).decode()
    elif isinstance(function.arguments, str):
        parts.arguments += function.arguments


def _tool_schema(spec: ToolSpec) -> FunctionTool:
    return FunctionTool(
        FunctionDefinition(
            name=spec.name.value, description=spec.description, parameters=spec.parameters
        )
    )


def _assistant_with_calls(text: str, calls: list[ToolCall]) -> AssistantMessage:
    return AssistantMessage(
        content=text or None,
        tool_calls=[
            ToolCallParam(id=call.id, function=FunctionCall(call.name, call.arguments or "{}"))
            for call in calls
        ],
    )


def _tool_message(result: ToolResult) -> ToolMessage:
    return ToolMessage(tool_call_id=result.call.id, content=result.content)
