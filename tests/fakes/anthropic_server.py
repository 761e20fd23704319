"""A local Anthropic Messages API server speaking the real streaming wire format.

`POST /v1/messages` with `"stream": true` answers SSE `event: <type>` / `data: {"type":
<type>, ...}` pairs in Anthropic's order: `message_start` (a Message with empty content and
input usage), per block `content_block_start` / `content_block_delta` (`text_delta`,
`thinking_delta`, `signature_delta`, `input_json_delta`) / `content_block_stop`, then
`message_delta` (stop_reason, cumulative usage) and `message_stop`; `ping` wherever the
script puts it; `error` events (`overloaded_error`, ...) after the 200; HTTP errors as
`{"type": "error", "error": {"type", "message"}}` with a `request-id` header.

Requests are checked as the real API checks them: `x-api-key`, `anthropic-version`,
`max_tokens`, roles, a top-level `system`, non-empty text blocks, `tool_result` blocks that
answer the previous assistant message's `tool_use` ids (and all of them), and with
`thinking` enabled an assistant tool-use message that starts with the signed thinking block
this server issued.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.openai_server import Cut, Hold, Pause, play, split, timing_step

# -- script steps -------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    input_tokens: int = 25


@dataclass(frozen=True)
class TextBlock:
    text: str
    pieces: int = 3


@dataclass(frozen=True)
class ThinkingBlock:
    text: str
    pieces: int = 2


@dataclass(frozen=True)
class RedactedThinkingBlock:
    data: str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"


@dataclass(frozen=True)
class ToolUseBlock:
    id: str
    name: str
    input: dict[str, Any]
    fragments: int = 3


@dataclass(frozen=True)
class Stop:
    """`message_delta` with the stop reason and usage, then `message_stop`."""

    reason: str = "end_turn"
    output_tokens: int = 15


@dataclass(frozen=True)
class Ping:
    pass


@dataclass(frozen=True)
class ErrorEvent:
    type: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass(frozen=True)
class Unknown:
    """An event type this client has never heard of (the versioning policy allows them)."""

    name: str = "content_block_annotation"


@dataclass(frozen=True)
class RawEvent:
    """One SSE event sent as given: a frame of a later API version, or a malformed one."""

    name: str
    data: str


@dataclass(frozen=True)
class HttpError:
    status: int
    type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)


Step = (
    Start
    | TextBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolUseBlock
    | Stop
    | Ping
    | ErrorEvent
    | Unknown
    | RawEvent
    | Pause
    | Hold
    | Cut
)
Script = list[Step] | HttpError


def answer(
    text: str, *, thinking: str = "", input_tokens: int = 25, output_tokens: int = 15
) -> list[Step]:
    steps: list[Step] = [Start(input_tokens), Ping()]
    if thinking:
        steps.append(ThinkingBlock(thinking))
    steps += [TextBlock(text), Stop("end_turn", output_tokens)]
    return steps


def tool_round(
    *calls: tuple[str, dict[str, Any]], text: str = "", thinking: str = ""
) -> list[Step]:
    steps: list[Step] = [Start(40)]
    if thinking:
        steps.append(ThinkingBlock(thinking))
    if text:
        steps.append(TextBlock(text, pieces=1))
    steps += [
        ToolUseBlock(id=f"toolu_{index:02d}{name}", name=name, input=arguments)
        for index, (name, arguments) in enumerate(calls)
    ]
    steps.append(Stop("tool_use", 30))
    return steps


# -- the server ---------------------------------------------------------------------------


@dataclass
class Recorded:
    model: str
    body: dict[str, Any]
    headers: dict[str, str]
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    client_gone: asyncio.Event = field(default_factory=asyncio.Event)


class FakeAnthropic:
    def __init__(self, *, api_key: str | None = "sk-ant-test-key") -> None:
        self.api_key = api_key
        self.scripts: dict[str, deque[Script]] = defaultdict(deque)
        self.requests: list[Recorded] = []
        self.signatures: set[str] = set()

    def enqueue(self, model: str, *scripts: Script) -> None:
        self.scripts[model].extend(scripts)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        return app

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            return _error(401, "authentication_error", "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return _error(400, "invalid_request_error", "anthropic-version: header is required")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid_request_error", "There was an issue with the JSON body")
        problem = self._validate(body) if isinstance(body, dict) else "body: must be an object"
        if problem is not None:
            return _error(400, "invalid_request_error", problem)
        model = body["model"]
        record = Recorded(model=model, body=body, headers=dict(request.headers))
        self.requests.append(record)
        queue = self.scripts.get(model)
        if not queue:
            return _error(404, "not_found_error", f"model: {model}")
        script = queue.popleft()
        if isinstance(script, HttpError):
            record.finished.set()
            return _error(script.status, script.type, script.message, script.headers)
        return await self._stream(request, record, script)

    async def _stream(
        self, request: web.Request, record: Recorded, script: list[Step]
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "request-id": _request_id(),
            }
        )
        await response.prepare(request)
        index = 0

        async def send(name: str, payload: dict[str, Any]) -> None:
            data = json.dumps({"type": name, **payload})
            await response.write(f"event: {name}\ndata: {data}\n\n".encode())

        async def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
            nonlocal index
            await send("content_block_start", {"index": index, "content_block": start})
            for delta in deltas:
                await send("content_block_delta", {"index": index, "delta": delta})
            await send("content_block_stop", {"index": index})
            index += 1

        async def steps() -> None:
            for step in script:
                if isinstance(step, Start):
                    message: dict[str, Any] = {
                        "id": f"msg_{uuid.uuid4().hex[:24]}",
                        "type": "message",
                        "role": "assistant",
                        "content": [],
                        "model": record.model,
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": step.input_tokens, "output_tokens": 1},
                    }
                    await send("message_start", {"message": message})
                elif isinstance(step, TextBlock):
                    await block(
                        {"type": "text", "text": ""},
                        [
                            {"type": "text_delta", "text": part}
                            for part in split(step.text, step.pieces)
                        ],
                    )
                elif isinstance(step, ThinkingBlock):
                    signature = f"sig-{uuid.uuid4().hex}"
                    self.signatures.add(signature)
                    deltas = [
                        {"type": "thinking_delta", "thinking": part}
                        for part in split(step.text, step.pieces)
                    ]
                    deltas.append({"type": "signature_delta", "signature": signature})
                    await block({"type": "thinking", "thinking": ""}, deltas)
                elif isinstance(step, RedactedThinkingBlock):
                    await block({"type": "redacted_thinking", "data": step.data}, [])
                elif isinstance(step, ToolUseBlock):
                    start = {"type": "tool_use", "id": step.id, "name": step.name, "input": {}}
                    await block(
                        start,
                        [
                            {"type": "input_json_delta", "partial_json": part}
                            for part in ["", *split(json.dumps(step.input), step.fragments)]
                        ],
                    )
                elif isinstance(step, Stop):
                    output_tokens = step.output_tokens
                    await send(
                        "message_delta",
                        {
                            "delta": {"stop_reason": step.reason, "stop_sequence": None},
                            "usage": {"output_tokens": output_tokens},
                        },
                    )
                    await send("message_stop", {})
                elif isinstance(step, Ping):
                    await send("ping", {})
                elif isinstance(step, ErrorEvent):
                    await send("error", {"error": {"type": step.type, "message": step.message}})
                elif isinstance(step, Unknown):
                    await send(step.name, {"index": index, "note": "new in a later API version"})
                elif isinstance(step, RawEvent):
                    await response.write(f"event: {step.name}\ndata: {step.data}\n\n".encode())
                else:
                    await timing_step(step, request)

        return await play(response, record, steps)

    def _validate(self, body: dict[str, Any]) -> str | None:
        if not isinstance(body.get("model"), str):
            return "model: Field required"
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens: Field required"
        if body.get("system") is not None and not isinstance(body["system"], str | list):
            return "system: Input should be a valid string"
        thinking = body.get("thinking")
        if thinking is not None:
            budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
            if not isinstance(budget, int) or budget < 1024:
                return (
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                )
            if budget >= body["max_tokens"]:
                return "`max_tokens` must be greater than `thinking.budget_tokens`"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "messages: at least one message is required"
        expected: set[str] = set()
        for position, message in enumerate(messages):
            where = f"messages.{position}"
            role = message.get("role") if isinstance(message, dict) else None
            if role not in ("user", "assistant"):
                return (
                    f'{where}.role: Unexpected role "{role}". The Messages API accepts a '
                    'top-level `system` parameter, not "system" as an input message role.'
                )
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list) or not blocks:
                return f"{where}.content: must be a string or a non-empty list of blocks"
            answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            if answered - expected:
                return (
                    f"{where}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{', '.join(sorted(map(str, answered - expected)))}. Each `tool_result` block "
                    "must have a corresponding `tool_use` block in the previous message."
                )
            if expected - answered:
                return (
                    f"{where}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(sorted(expected - answered))}"
                )
            expected = set()
            for number, block_ in enumerate(blocks):
                problem = self._block(f"{where}.content.{number}", role, block_)
                if problem:
                    return problem
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            if role == "assistant" and uses:
                expected = {str(b.get("id")) for b in uses}
                if thinking is not None and blocks[0].get("type") not in (
                    "thinking",
                    "redacted_thinking",
                ):
                    return (
                        f"{where}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
                        f"found `{blocks[0].get('type')}`. When `thinking` is enabled, a final "
                        "`assistant` message must start with a thinking block."
                    )
        if expected:
            missing = ", ".join(sorted(expected))
            return f"`tool_use` ids were found without `tool_result` blocks: {missing}"
        for tool in body.get("tools") or ():
            if not tool.get("name") or not isinstance(tool.get("input_schema"), dict):
                return "tools.0: each tool needs a name and an input_schema"
        choice = body.get("tool_choice")
        if choice is not None and choice.get("type") not in ("auto", "any", "tool", "none"):
            return "tool_choice.type: Input tag does not match any of the expected tags"
        return None

    def _block(self, where: str, role: str, block: Any) -> str | None:
        if not isinstance(block, dict):
            return f"{where}: Input should be an object"
        kind = block.get("type")
        if kind == "text" and not block.get("text"):
            return f"{where}: text content blocks must be non-empty"
        if kind == "thinking" and block.get("signature") not in self.signatures:
            return f"{where}: Invalid `signature` in `thinking` block"
        if kind == "tool_use" and not isinstance(block.get("input"), dict):
            return f"{where}.input: Input should be a valid dictionary"
        if kind == "tool_result" and role != "user":
            return f"{where}: tool_result blocks are only allowed in user messages"
        return None


def _error(
    status: int, kind: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return web.json_response(
        body, status=status, headers={"request-id": _request_id(), **(headers or {})}
    )


def _request_id() -> str:
    return f"req_{uuid.uuid4().hex[:24]}"


__all__ = ["Cut", "FakeAnthropic", "Hold", "Pause"]
