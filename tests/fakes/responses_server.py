"""A local OpenAI Responses API server speaking its streaming wire format, for Codex CLI.

`POST /v1/responses` with `"stream": true` answers SSE `event: <type>` / `data: {...}` in the
Responses order: `response.created`, per output item `response.output_item.added`, text as
`response.output_text.delta`, `response.output_item.done`, then `response.completed` with
`usage` (`input_tokens`, `input_tokens_details.cached_tokens`, `output_tokens`,
`output_tokens_details.reasoning_tokens`). Requests need `Authorization: Bearer <key>`.
Codex tries a WebSocket on `GET /v1/responses` first: that is refused (404), so it falls
back to HTTPS as it does against servers without one.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Run:
    """A call of Codex's shell tool, `exec_command`."""

    cmd: str


Turn = list[Say | Run]


class FakeResponses:
    def __init__(self, *, api_key: str = "sk-codex-test") -> None:
        self.api_key = api_key
        self.turns: deque[Turn] = deque()
        self.requests: list[dict[str, Any]] = []
        self.input_tokens = 1200
        self.output_tokens = 60

    def enqueue(self, *turns: Turn) -> None:
        self.turns.extend(turns)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/responses", self._responses)
        return app

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict) or body.get("stream") is not True or "input" not in body:
            return _error(400, "stream: true and input are required")
        self.requests.append(body)
        if not self.turns:
            return _error(500, "no scripted turn left")
        return await self._stream(request, body, self.turns.popleft())

    async def _stream(
        self, request: web.Request, body: dict[str, Any], turn: Turn
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        sequence = 0

        async def send(kind: str, payload: dict[str, Any]) -> None:
            nonlocal sequence
            data = json.dumps({"type": kind, "sequence_number": sequence, **payload})
            sequence += 1
            await response.write(f"event: {kind}\ndata: {data}\n\n".encode())

        shell: dict[str, Any] = {"id": f"resp_{uuid.uuid4().hex[:20]}", "object": "response"}
        shell |= {"model": body.get("model"), "status": "in_progress", "output": []}
        await send("response.created", {"response": shell})
        output = []
        for index, step in enumerate(turn):
            item = _item(step)
            added = {**item, "status": "in_progress"}
            if isinstance(step, Say):
                added["content"] = []
            await send("response.output_item.added", {"output_index": index, "item": added})
            if isinstance(step, Say):
                await send(
                    "response.output_text.delta",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": step.text,
                    },
                )
            await send("response.output_item.done", {"output_index": index, "item": item})
            output.append(item)
        usage = {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.input_tokens + self.output_tokens,
        }
        done = {**shell, "status": "completed", "output": output, "usage": usage}
        await send("response.completed", {"response": done})
        await response.write_eof()
        return response


def _item(step: Say | Run) -> dict[str, Any]:
    if isinstance(step, Say):
        return {
            "type": "message",
            "id": f"msg_{uuid.uuid4().hex[:20]}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }
    return {
        "type": "function_call",
        "id": f"fc_{uuid.uuid4().hex[:20]}",
        "call_id": f"call_{uuid.uuid4().hex[:20]}",
        "name": "exec_command",
        "arguments": json.dumps({"cmd": step.cmd}),
        "status": "completed",
    }


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return web.json_response(body, status=status)
