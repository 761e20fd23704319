"""The OpenAI Chat Completions wire as msgspec Structs: the request we POST to
`{base}/chat/completions` with `"stream": true`, and the `chat.completion.chunk` objects of
its answer (OpenAI API reference: "Create chat completion", "The chat completion chunk
object"), as OpenAI, vLLM, Ollama, llama.cpp's server and OpenRouter send them.

Decoding never forbids unknown fields: every server adds its own (`x_groq`, `timings`,
`system_fingerprint`, a vendor's delta keys). Fields OpenAI documents as always sent and
that we read are required (a choice's `index` and `delta`, usage's token counts), so a
chunk without them is a clear error. Where compatible servers differ from OpenAI, the type
says so: `choices` may be null, a tool-call fragment may lack its `index`, a tool call's
`arguments` may be the object rather than its JSON text, and an error may be a string.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType

from bot.runtimes.wire_json import JsonObject

# -- the request ----------------------------------------------------------------------


class SystemMessage(msgspec.Struct, frozen=True, tag_field="role", tag="system"):
    content: str


class UserMessage(msgspec.Struct, frozen=True, tag_field="role", tag="user"):
    content: str


class FunctionCall(msgspec.Struct, frozen=True):
    name: str
    arguments: str  # JSON text, as the model wrote it


class ToolCallParam(msgspec.Struct, frozen=True):
    id: str
    function: FunctionCall
    type: Literal["function"] = "function"


class AssistantMessage(msgspec.Struct, frozen=True, tag_field="role", tag="assistant"):
    content: str | None  # null when the message only calls tools
    tool_calls: list[ToolCallParam] | UnsetType = UNSET


class ToolMessage(msgspec.Struct, frozen=True, tag_field="role", tag="tool"):
    tool_call_id: str
    content: str


MessageParam = SystemMessage | UserMessage | AssistantMessage | ToolMessage


class FunctionDefinition(msgspec.Struct, frozen=True):
    name: str
    description: str
    parameters: JsonObject  # the tool's JSON Schema, given to the model as it is


class FunctionTool(msgspec.Struct, frozen=True):
    function: FunctionDefinition
    type: Literal["function"] = "function"


class StreamOptions(msgspec.Struct, frozen=True):
    include_usage: bool


class ChatCompletionsRequest(msgspec.Struct, frozen=True):
    model: str
    messages: list[MessageParam]
    stream: bool
    stream_options: StreamOptions
    # `max_tokens`, not `max_completion_tokens`: every compatible server reads it.
    max_tokens: int
    tools: list[FunctionTool] | UnsetType = UNSET
    tool_choice: Literal["none", "auto", "required"] | UnsetType = UNSET


# -- the streamed chunks --------------------------------------------------------------


class FunctionDelta(msgspec.Struct, frozen=True):
    name: str | None = None
    # JSON text in pieces; a few servers send the whole arguments object instead.
    arguments: str | JsonObject | None = None


class ToolCallDelta(msgspec.Struct, frozen=True):
    index: int | None = None  # OpenAI always sends it; some older servers did not
    id: str | None = None
    function: FunctionDelta | None = None


class ChoiceDelta(msgspec.Struct, frozen=True):
    content: str | None = None
    reasoning_content: str | None = None  # DeepSeek, llama.cpp
    reasoning: str | None = None  # vLLM, Ollama, OpenRouter
    tool_calls: list[ToolCallDelta] | None = None


class StreamError(msgspec.Struct, frozen=True):
    """`{"error": {...}}` after the 200 (vLLM, OpenRouter), OpenAI's error object shape."""

    message: str | None = None
    type: str | None = None
    code: int | str | None = None


class Choice(msgspec.Struct, frozen=True):
    index: int
    delta: ChoiceDelta
    finish_reason: str | None = None  # "error" with `error` set, on some servers
    error: StreamError | str | None = None


class ChunkUsage(msgspec.Struct, frozen=True):
    prompt_tokens: int
    completion_tokens: int


class ChatCompletionChunk(msgspec.Struct, frozen=True):
    # Null or absent on a server's usage-only or error-only chunk.
    choices: list[Choice] | None = None
    usage: ChunkUsage | None = None  # null on every chunk but the last with include_usage
    error: StreamError | str | None = None


CHUNKS = msgspec.json.Decoder(ChatCompletionChunk)
