"""The Anthropic Messages API wire as msgspec Structs: the request we POST to `/v1/messages`,
the server-sent events of its `"stream": true` answer, and the content blocks that travel
both ways (docs: "Messages", "Streaming Messages", "Versions").

Decoding never forbids unknown fields: the API may add output fields within a version. The
fields we read are required where the documentation always sends them, so a frame without
them is a clear error. Event, content block and delta types are tagged unions on `type`,
decoded with `TaggedDecoder`, which skips the types added after this was written (the
versioning policy lists new streaming event types as a compatible change). A block's start
and a delta carry their own tagged object, kept raw in the event and decoded on its own, so
an unknown block or delta type skips only itself, not the event around it.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType

from bot.runtimes.wire_json import JsonObject, TaggedDecoder

# -- content blocks (a streamed answer's, and the ones sent back with tool results) ----


class TextBlock(msgspec.Struct, frozen=True, tag_field="type", tag="text"):
    text: str


class ThinkingBlock(msgspec.Struct, frozen=True, tag_field="type", tag="thinking"):
    thinking: str
    signature: str = ""  # streamed as a `signature_delta`; the API checks it when sent back


class RedactedThinkingBlock(msgspec.Struct, frozen=True, tag_field="type", tag="redacted_thinking"):
    data: str  # encrypted reasoning, handed back unchanged


class ToolUseBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_use"):
    id: str
    name: str
    # The arguments object the model wrote for the tool (arbitrary JSON); `{}` when the
    # block starts, the whole object once its `input_json_delta`s are joined.
    input: JsonObject = {}


class ToolResultBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_result"):
    tool_use_id: str
    content: str
    is_error: bool | UnsetType = UNSET


ContentBlock = TextBlock | ThinkingBlock | RedactedThinkingBlock | ToolUseBlock
ContentParam = ContentBlock | ToolResultBlock

# -- the request ----------------------------------------------------------------------


class MessageParam(msgspec.Struct, frozen=True):
    # The system prompt is the request's `system`: the API refuses a "system" role here.
    role: Literal["user", "assistant"]
    content: str | list[ContentParam]


class ToolParam(msgspec.Struct, frozen=True):
    name: str
    description: str
    input_schema: JsonObject  # the tool's JSON Schema, given to the model as it is


class ToolChoice(msgspec.Struct, frozen=True):
    type: Literal["auto", "any", "none"]


class ThinkingConfig(msgspec.Struct, frozen=True):
    budget_tokens: int
    type: Literal["enabled"] = "enabled"


class MessagesRequest(msgspec.Struct, frozen=True):
    model: str
    max_tokens: int
    system: str
    messages: list[MessageParam]
    stream: bool
    thinking: ThinkingConfig | UnsetType = UNSET
    tools: list[ToolParam] | UnsetType = UNSET
    tool_choice: ToolChoice | UnsetType = UNSET


# -- streamed events ------------------------------------------------------------------


class TextDelta(msgspec.Struct, frozen=True, tag_field="type", tag="text_delta"):
    text: str


class ThinkingDelta(msgspec.Struct, frozen=True, tag_field="type", tag="thinking_delta"):
    thinking: str


class SignatureDelta(msgspec.Struct, frozen=True, tag_field="type", tag="signature_delta"):
    signature: str


class InputJsonDelta(msgspec.Struct, frozen=True, tag_field="type", tag="input_json_delta"):
    partial_json: str


BlockDelta = TextDelta | ThinkingDelta | SignatureDelta | InputJsonDelta


class MessageUsage(msgspec.Struct, frozen=True):
    """Token counts; the cache fields are absent or null when caching was not used, and a
    `message_delta` may repeat the input counts (cumulative) or send only `output_tokens`."""

    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens: int | None = None


class StartedMessage(msgspec.Struct, frozen=True):
    """The Message of `message_start` (empty content); only its usage is read."""

    usage: MessageUsage


class MessageStart(msgspec.Struct, frozen=True, tag_field="type", tag="message_start"):
    message: StartedMessage


class ContentBlockStart(msgspec.Struct, frozen=True, tag_field="type", tag="content_block_start"):
    index: int
    content_block: msgspec.Raw  # a ContentBlock, decoded by `BLOCKS`


class ContentBlockDelta(msgspec.Struct, frozen=True, tag_field="type", tag="content_block_delta"):
    index: int
    delta: msgspec.Raw  # a BlockDelta, decoded by `DELTAS`


class ContentBlockStop(msgspec.Struct, frozen=True, tag_field="type", tag="content_block_stop"):
    index: int


class MessageDeltaBody(msgspec.Struct, frozen=True):
    stop_reason: str | None = None


class MessageDelta(msgspec.Struct, frozen=True, tag_field="type", tag="message_delta"):
    delta: MessageDeltaBody
    usage: MessageUsage  # output_tokens here are cumulative for the message


class MessageStop(msgspec.Struct, frozen=True, tag_field="type", tag="message_stop"):
    pass


class Ping(msgspec.Struct, frozen=True, tag_field="type", tag="ping"):
    pass


class ErrorBody(msgspec.Struct, frozen=True):
    type: str  # e.g. overloaded_error, api_error
    message: str


class ErrorEvent(msgspec.Struct, frozen=True, tag_field="type", tag="error"):
    error: ErrorBody


StreamEvent = (
    MessageStart
    | ContentBlockStart
    | ContentBlockDelta
    | ContentBlockStop
    | MessageDelta
    | MessageStop
    | Ping
    | ErrorEvent
)

EVENTS: TaggedDecoder[StreamEvent] = TaggedDecoder(StreamEvent)
BLOCKS: TaggedDecoder[ContentBlock] = TaggedDecoder(ContentBlock)
DELTAS: TaggedDecoder[BlockDelta] = TaggedDecoder(BlockDelta)
