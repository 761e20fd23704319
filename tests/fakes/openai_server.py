"""A local OpenAI-compatible Chat Completions server speaking the real streaming wire format.

`POST /v1/chat/completions` with `"stream": true` answers `text/event-stream` of
`data: {chat.completion.chunk}` lines and `data: [DONE]`, exactly as OpenAI documents it:
every chunk carries `id/object/created/model/system_fingerprint/choices`, `"usage": null`
when `stream_options.include_usage` is set and then a last chunk with `"choices": []` and
the usage; tool calls stream as `delta.tool_calls[{index, id, type, function{name,
arguments}}]` fragments; errors are `{"error": {"message", "type", "param", "code"}}`.
The request is checked the way the real API checks it (key, model, message roles, every
`tool` message answering an assistant `tool_calls` id and every id answered), so a client
that passes here sends what OpenAI, vLLM and Ollama accept.

Each request plays the next script queued for its model: a list of steps, or an
`HttpError`. Each request is recorded, with events for "stream finished" and "client went
away before the end" so tests can assert that cancelling a turn closed the connection.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.served import served

# -- script steps -------------------------------------------------------------------------


@dataclass(frozen=True)
class Content:
    text: str


@dataclass(frozen=True)
class Reasoning:
    text: str
    field: str = "reasoning_content"  # DeepSeek/llama.cpp; vLLM/Ollama use "reasoning"


@dataclass(frozen=True)
class ToolCallStep:
    id: str
    name: str
    arguments: dict[str, Any]
    index: int = 0
    fragments: int = 3  # the arguments JSON arrives in this many pieces


@dataclass(frozen=True)
class Finish:
    reason: str = "stop"


@dataclass(frozen=True)
class UsageStep:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Done:
    pass


@dataclass(frozen=True)
class StreamError:
    """`data: {"error": {...}}` after the 200, as vLLM and OpenRouter send it."""

    message: str
    type: str = "server_error"
    code: int | str | None = None


@dataclass(frozen=True)
class Raw:
    """A raw SSE line (e.g. a chunk with unknown fields or an SSE comment)."""

    line: str


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Hold:
    """Stop sending and wait for the client to go away (records it)."""


@dataclass(frozen=True)
class Cut:
    """Drop the connection mid-stream, without finishing the chunked body."""


class _CutOnPurpose(Exception):
    """A Cut step dropped the connection: the script ends there."""


async def timing_step(step: object, request: web.Request) -> None:
    """Play a step every fake provider knows: Pause, Hold or Cut (others: nothing)."""
    if isinstance(step, Pause):
        await asyncio.sleep(step.seconds)
    elif isinstance(step, Hold):
        await asyncio.Event().wait()  # until the client leaves and we are cancelled
    elif isinstance(step, Cut):
        assert request.transport is not None
        request.transport.close()
        raise _CutOnPurpose


async def play(
    response: web.StreamResponse, record: Any, steps: Callable[[], Awaitable[None]]
) -> web.StreamResponse:
    """Stream a script (`steps`) to its end and record how it ended: finished (written out,
    or cut on purpose) or the client gone."""
    try:
        await steps()
        await response.write_eof()
        record.finished.set()
    except _CutOnPurpose:
        record.finished.set()
    except (ConnectionResetError, ConnectionError):
        record.client_gone.set()
    except asyncio.CancelledError:  # the client closed the connection
        record.client_gone.set()
        raise
    return response


@dataclass(frozen=True)
class HttpError:
    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


Step = (
    Content
    | Reasoning
    | ToolCallStep
    | Finish
    | UsageStep
    | Done
    | StreamError
    | Raw
    | Pause
    | Hold
    | Cut
)
Script = list[Step] | HttpError


def answer(
    text: str,
    *,
    reasoning: str = "",
    field: str = "reasoning_content",
    usage: tuple[int, int] = (21, 9),
    pieces: int = 3,
) -> list[Step]:
    """A complete streamed answer: reasoning, content in `pieces`, stop, usage, [DONE]."""
    steps: list[Step] = []
    if reasoning:
        steps.extend(Reasoning(part, field) for part in split(reasoning, 2))
    steps.extend(Content(part) for part in split(text, pieces))
    steps += [Finish("stop"), UsageStep(*usage), Done()]
    return steps


def tool_round(*calls: tuple[str, dict[str, Any]], usage: tuple[int, int] = (30, 12)) -> list[Step]:
    """A response that only calls tools (finish_reason "tool_calls")."""
    steps: list[Step] = [
        ToolCallStep(id=f"call_{index}_{name}", name=name, arguments=arguments, index=index)
        for index, (name, arguments) in enumerate(calls)
    ]
    steps += [Finish("tool_calls"), UsageStep(*usage), Done()]
    return steps


def split(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- the server ---------------------------------------------------------------------------


@dataclass
class Recorded:
    model: str
    body: dict[str, Any]
    headers: dict[str, str]
    received_at: float
    peer: tuple[str, int] | None = None  # the client's address: same port = same connection
    writes: list[float] = field(default_factory=list)  # perf_counter after each chunk written
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    client_gone: asyncio.Event = field(default_factory=asyncio.Event)


class FakeOpenAI:
    def __init__(self, *, api_key: str | None = None, unstreamed: bool = False) -> None:
        self.api_key = api_key
        # Also answer `"stream": false` with one `chat.completion` (aider's `--no-stream`);
        # off by default, so a client that should stream is caught when it does not.
        self.unstreamed = unstreamed
        self.scripts: dict[str, deque[Script]] = defaultdict(deque)
        self.requests: list[Recorded] = []

    def enqueue(self, model: str, *scripts: Script) -> None:
        self.scripts[model].extend(scripts)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        return app

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        problem = self._authorise(request)
        if problem is not None:
            return problem
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return _error(400, "The request body must be a JSON object.")
        whole = self.unstreamed and not body.get("stream")
        problem = _validate({**body, "stream": True} if whole else body)
        if problem is not None:
            return problem
        model = body["model"]
        record = Recorded(
            model=model,
            body=body,
            headers=dict(request.headers),
            received_at=time.perf_counter(),
            peer=request.transport.get_extra_info("peername") if request.transport else None,
        )
        self.requests.append(record)
        queue = self.scripts.get(model)
        if not queue:
            return _error(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
        script = queue.popleft()
        if isinstance(script, HttpError):
            record.finished.set()
            return _error(
                script.status,
                script.message,
                kind=script.type,
                code=script.code,
                headers=script.headers,
            )
        if whole:
            record.finished.set()
            return web.json_response(_completion(model, script))
        return await self._stream(request, record, script)

    def _authorise(self, request: web.Request) -> web.Response | None:
        if self.api_key is None:
            return None
        given = request.headers.get("Authorization", "")
        if given == f"Bearer {self.api_key}":
            return None
        # OpenAI echoes (a masked form of) the key it got; echo it whole, the worst case.
        shown = given.removeprefix("Bearer ") or "(none)"
        return _error(401, f"Incorrect API key provided: {shown}.", code="invalid_api_key")

    async def _stream(
        self, request: web.Request, record: Recorded, script: list[Step]
    ) -> web.StreamResponse:
        include_usage = bool((record.body.get("stream_options") or {}).get("include_usage"))
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
            }
        )
        await response.prepare(request)
        envelope = {
            "id": f"chatcmpl-fake{len(self.requests)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": record.model,
            "system_fingerprint": "fp_fake",
        }

        async def send(payload: dict[str, Any] | str) -> None:
            text = payload if isinstance(payload, str) else json.dumps(payload)
            await response.write(f"data: {text}\n\n".encode())
            record.writes.append(time.perf_counter())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            payload = {
                **envelope,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                payload["usage"] = None
            return payload

        async def steps() -> None:
            await send(chunk({"role": "assistant", "content": "", "refusal": None}))
            for step in script:
                if isinstance(step, Content):
                    await send(chunk({"content": step.text}))
                elif isinstance(step, Reasoning):
                    await send(chunk({step.field: step.text}))
                elif isinstance(step, ToolCallStep):
                    arguments = json.dumps(step.arguments)
                    head = {
                        "index": step.index,
                        "id": step.id,
                        "type": "function",
                        "function": {"name": step.name, "arguments": ""},
                    }
                    await send(chunk({"tool_calls": [head]}))
                    for part in split(arguments, step.fragments):
                        await send(
                            chunk(
                                {
                                    "tool_calls": [
                                        {"index": step.index, "function": {"arguments": part}}
                                    ]
                                }
                            )
                        )
                elif isinstance(step, Finish):
                    await send(chunk({}, step.reason))
                elif isinstance(step, UsageStep):
                    if include_usage:  # as OpenAI: only when the client asked
                        usage = {
                            "prompt_tokens": step.prompt_tokens,
                            "completion_tokens": step.completion_tokens,
                            "total_tokens": step.prompt_tokens + step.completion_tokens,
                        }
                        await send({**envelope, "choices": [], "usage": usage})
                elif isinstance(step, Done):
                    await send("[DONE]")
                elif isinstance(step, StreamError):
                    error = {
                        "message": step.message,
                        "type": step.type,
                        "param": None,
                        "code": step.code,
                    }
                    await send({"error": error})
                elif isinstance(step, Raw):
                    await response.write(f"{step.line}\n".encode())
                else:
                    await timing_step(step, request)

        return await play(response, record, steps)


def _completion(model: str, script: list[Step]) -> dict[str, Any]:
    """The script as one `chat.completion` object (text, finish reason and usage)."""
    text = "".join(step.text for step in script if isinstance(step, Content))
    finish = next((step.reason for step in script if isinstance(step, Finish)), "stop")
    usage = next((step for step in script if isinstance(step, UsageStep)), UsageStep(0, 0))
    return {
        "id": f"chatcmpl-{int(time.time() * 1000)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        },
    }


def _validate(body: dict[str, Any]) -> web.Response | None:
    """The request checks OpenAI makes that our client could get wrong."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return _error(400, "you must provide a model parameter", param="model")
    if body.get("stream") is not True:
        return _error(400, "this fake only streams: set stream to true", param="stream")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return _error(400, "[] is too short - 'messages'", param="messages")
    pending: list[str] = []
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
        ):
            return _error(
                400,
                f"Invalid value for 'messages[{position}].role'.",
                param=f"messages.[{position}].role",
            )
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return _error(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    param=f"messages.[{position}].role",
                )
            pending.remove(call_id)
            if not isinstance(message.get("content"), str):
                return _error(400, f"Invalid type for 'messages[{position}].content'.")
            continue
        if pending:
            return _error(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}",
                param="messages",
            )
        if role == "assistant" and message.get("tool_calls"):
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                if (
                    call.get("type") != "function"
                    or not call.get("id")
                    or not isinstance(function.get("arguments"), str)
                ):
                    return _error(400, f"Invalid 'messages[{position}].tool_calls'.")
                pending.append(call["id"])
        elif not isinstance(message.get("content"), str):
            return _error(400, f"Invalid type for 'messages[{position}].content'.")
    if pending:
        return _error(400, f"tool_call_ids did not have response messages: {', '.join(pending)}")
    tools = body.get("tools")
    if tools is not None:
        for tool in tools:
            function = tool.get("function") or {}
            if (
                tool.get("type") != "function"
                or not function.get("name")
                or "parameters" not in function
            ):
                return _error(
                    400, "Invalid 'tools': each needs type function, a name and parameters."
                )
    if body.get("tool_choice") not in (None, "none", "auto", "required"):
        return _error(400, "Invalid value for 'tool_choice'.", param="tool_choice")
    return None


def _error(
    status: int,
    message: str,
    *,
    kind: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.json_response(body, status=status, headers=headers)


@asynccontextmanager
async def running(app: web.Application) -> AsyncIterator[str]:
    """Serve `app` on a free loopback port; yields its base URL (for scripts and benches)."""
    # handler_cancellation: a client that goes away cancels its handler, as under
    # pytest-aiohttp's TestServer, so `client_gone` is recorded the same way.
    async with served(app, access_log=None, handler_cancellation=True) as port:
        yield f"http://127.0.0.1:{port}"
