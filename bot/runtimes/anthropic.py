"""The Anthropic runtime: the Messages API with `"stream": true`.

Wire format (POST {base}/v1/messages, `x-api-key`, `anthropic-version`): SSE `event:`/`data:`
pairs. `message_start` (input usage), then per content block `content_block_start`,
`content_block_delta`s (`text_delta` -> delta, `thinking_delta` -> thinking,
`signature_delta` kept only to hand the thinking block back, `input_json_delta` for a
`tool_use` block's input), `content_block_stop`; then `message_delta` (stop reason,
cumulative output usage) and `message_stop`. `ping` may come anywhere; an `error` event
(e.g. `overloaded_error`) can arrive after the 200; event, block and delta types added
after this was written are ignored, as Anthropic's versioning policy asks. The wire's
shapes are Structs in bot.runtimes.anthropic_wire; a frame of a known type in the wrong
shape is an error that names the field.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

import aiohttp
import msgspec
from msgspec import UNSET

from bot.runtimes.anthropic_wire import (
    BLOCKS,
    DELTAS,
    EVENTS,
    BlockDelta,
    ContentBlock,
    ContentBlockDelta,
    ContentBlockStart,
    ContentParam,
    ErrorEvent,
    InputJsonDelta,
    MessageDelta,
    MessageParam,
    MessagesRequest,
    MessageStart,
    MessageStop,
    MessageUsage,
    RedactedThinkingBlock,
    SignatureDelta,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingConfig,
    ThinkingDelta,
    ToolChoice,
    ToolParam,
    ToolResultBlock,
    ToolUseBlock,
)
from bot.runtimes.base import Delta, RuntimeEvent, RuntimeRequest, Status, Thinking, Usage
from bot.runtimes.budget import Fitted
from bot.runtimes.eventstream import server_events
from bot.runtimes.rounds import HostedRuntime, RoundOutcome, WireConversation, WireTurn
from bot.runtimes.tools import ToolCall, ToolResult, ToolSpec
from bot.runtimes.transport import (
    UpstreamFailure,
    clip,
    error_text,
    malformed_frame,
    redact,
)
from bot.runtimes.wire_json import JsonObject

log = logging.getLogger(__name__)
API_VERSION = "2023-06-01"
_RETRYABLE_ERRORS = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)
_OBJECT = msgspec.json.Decoder(JsonObject)


@dataclass
class _Block:
    """One content block as it streams: how it started, and what its deltas added."""

    start: ContentBlock
    text: str = ""
    thinking: str = ""
    signature: str = ""
    partial_json: str = ""  # a tool_use block's input, as JSON text in pieces

    @classmethod
    def started(cls, start: ContentBlock) -> _Block:
        if isinstance(start, TextBlock):
            return cls(start, text=start.text)
        if isinstance(start, ThinkingBlock):
            return cls(start, thinking=start.thinking, signature=start.signature)
        return cls(start)

    def add(self, delta: BlockDelta | None) -> list[RuntimeEvent]:
        """Fold one delta in (None: a delta type we do not know); the thinking/delta
        events it produces."""
        if isinstance(delta, TextDelta):
            self.text += delta.text
            return [Delta(delta.text)] if delta.text else []
        if isinstance(delta, ThinkingDelta):
            self.thinking += delta.thinking
            return [Thinking(delta.thinking)] if delta.thinking else []
        if isinstance(delta, SignatureDelta):
            self.signature += delta.signature
        elif isinstance(delta, InputJsonDelta):
            self.partial_json += delta.partial_json
        return []

    def handed_back(self) -> ContentParam | None:
        """The block as the next request carries it: thinking unchanged (the API checks
        its signature), non-empty text, tool_use with its parsed input."""
        start = self.start
        if isinstance(start, ThinkingBlock):
            return ThinkingBlock(thinking=self.thinking, signature=self.signature)
        if isinstance(start, RedactedThinkingBlock):
            return start
        if isinstance(start, TextBlock):
            return TextBlock(self.text) if self.text else None
        return ToolUseBlock(id=start.id, name=start.name, input=self._input(start))

    def _input(self, start: ToolUseBlock) -> JsonObject:
        if not self.partial_json:
            return start.input
        try:
            return _OBJECT.decode(self.partial_json)
        except msgspec.DecodeError:  # not JSON, or not an object: the model's mistake
            return {}


@dataclass
class _Message:
    """One streamed message: its content blocks by index, usage and how it stopped."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    done: bool = False

    @property
    def text(self) -> str:
        return "".join(
            b.text for _, b in sorted(self.blocks.items()) if isinstance(b.start, TextBlock)
        )

    def tool_calls(self) -> list[ToolCall]:
        return [
            # The input streams as `input_json_delta` pieces; a block that brought it whole
            # in its start (no piece) is called with that input, as the history hands back.
            ToolCall(
                id=b.start.id,
                name=b.start.name,
                arguments=b.partial_json or msgspec.json.encode(b.start.input).decode(),
            )
            for _, b in sorted(self.blocks.items())
            if isinstance(b.start, ToolUseBlock)
        ]

    def history_content(self) -> list[ContentParam]:
        """The assistant content to send back with tool results."""
        content = (block.handed_back() for _, block in sorted(self.blocks.items()))
        return [block for block in content if block is not None]


class _Conversation(WireConversation[MessageParam, _Message]):
    """One turn's messages on the Messages API wire (bot.runtimes.rounds drives it)."""

    def outcome(self, round_number: int) -> RoundOutcome:
        # Only a `tool_use` stop asks for tools; other stops end the turn with its answer.
        calls = self.state.tool_calls() if self.state.stop_reason == "tool_use" else []
        usage = Usage(input_tokens=self.state.input_tokens, output_tokens=self.state.output_tokens)
        return RoundOutcome(text=self.state.text, calls=calls, usage=usage)

    def record(self, outcome: RoundOutcome, results: list[ToolResult]) -> None:
        self.turn.messages.append(MessageParam("assistant", self.state.history_content()))
        self.turn.messages.append(MessageParam("user", [_tool_result(r) for r in results]))


class AnthropicRuntime(HostedRuntime[MessageParam, _Message]):
    name = "anthropic"
    PATH = "v1/messages"
    PROVIDER = "the Anthropic endpoint"

    def messages(self, request: RuntimeRequest, fitted: Fitted) -> list[MessageParam]:
        # The API refuses empty text; a stored turn can be empty (a reply that was all
        # trailer). The system prompt travels as the request's `system`, never as a message.
        return [
            MessageParam(m.role, m.content)
            for m in fitted.messages
            if m.role != "system" and m.content.strip()
        ]

    def conversation(self, turn: WireTurn[MessageParam, _Message]) -> _Conversation:
        return _Conversation(turn, _Message)

    def body(self, turn: WireTurn[MessageParam, _Message], *, final: bool) -> MessagesRequest:
        request, tools = turn.request, turn.tools
        return MessagesRequest(
            model=self.model,
            max_tokens=request.max_output_tokens + self.thinking_tokens,
            system=request.system,
            messages=turn.messages,
            stream=True,
            thinking=ThinkingConfig(self.thinking_tokens) if self.thinking_tokens else UNSET,
            tools=UNSET if tools is None else [_tool_param(spec) for spec in tools.specs],
            tool_choice=ToolChoice("none") if tools is not None and final else UNSET,
        )

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "Accept": "text/event-stream"}
        if self.endpoint.api_key:
            headers["x-api-key"] = self.endpoint.api_key.reveal()
        return headers

    async def read(
        self, response: aiohttp.ClientResponse, state: _Message
    ) -> AsyncGenerator[RuntimeEvent, None]:
        async for sse in server_events(response.content):
            for event in self._fold(sse.data, state):
                yield event
            if state.done:
                break
        if not state.done:
            raise UpstreamFailure(
                f"the stream from {self.where} ended before the answer was complete", retryable=True
            )
        if state.stop_reason == "max_tokens":
            yield Status("the answer reached the output token limit")
        elif state.stop_reason == "refusal":
            yield Status("the model declined to answer")

    def _fold(self, data: str, state: _Message) -> list[RuntimeEvent]:
        """Decode one event and fold it into the message state; an `error` event or a
        malformed one raises, `message_stop` marks the message done."""
        try:
            event = EVENTS.decode(data)
            if isinstance(event, ErrorEvent):
                raise self._stream_error(event)
            if isinstance(event, MessageStop):
                state.done = True
            return [] if event is None else _apply(event, state)
        except msgspec.DecodeError as exc:
            raise malformed_frame(self.where, exc, frame="stream event") from None

    def _stream_error(self, event: ErrorEvent) -> UpstreamFailure:
        error = event.error
        shown = error_text(error.type, error.message) or "unknown error"
        detail = clip(redact(shown, self.endpoint.secrets()))
        return UpstreamFailure(
            f"{self.where} reported an error mid-stream: {detail}",
            retryable=error.type in _RETRYABLE_ERRORS,
        )


def _apply(event: StreamEvent, state: _Message) -> list[RuntimeEvent]:
    """Fold one event into the message state; the thinking/delta events it produces. A
    block or delta of a type added after this was written is skipped (None from its
    decoder), and so are the deltas of such a block."""
    if isinstance(event, MessageStart):
        _usage(state, event.message.usage)
    elif isinstance(event, ContentBlockStart):
        start = BLOCKS.decode(event.content_block, at="$.content_block")
        if start is not None:
            state.blocks[event.index] = _Block.started(start)
            if isinstance(start, TextBlock) and start.text:
                return [Delta(start.text)]
    elif isinstance(event, ContentBlockDelta):
        block = state.blocks.get(event.index)
        if block is not None:
            return block.add(DELTAS.decode(event.delta, at="$.delta"))
    elif isinstance(event, MessageDelta):
        if event.delta.stop_reason:
            state.stop_reason = event.delta.stop_reason
        _usage(state, event.usage)
    return []  # ping, content_block_stop and message_stop carry nothing to show


def _usage(state: _Message, usage: MessageUsage) -> None:
    inputs = [
        tokens
        for tokens in (
            usage.input_tokens,
            usage.cache_creation_input_tokens,
            usage.cache_read_input_tokens,
        )
        if tokens is not None
    ]
    if inputs:
        state.input_tokens = sum(inputs)
    if usage.output_tokens is not None:
        state.output_tokens = usage.output_tokens  # cumulative in message_delta


def _tool_param(spec: ToolSpec) -> ToolParam:
    return ToolParam(
        name=spec.name.value, description=spec.description, input_schema=spec.parameters
    )


def _tool_result(result: ToolResult) -> ToolResultBlock:
    return ToolResultBlock(
        tool_use_id=result.call.id,
        content=result.content,
        is_error=UNSET if result.ok else True,
    )
