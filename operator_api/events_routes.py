"""GET /api/operator/events: the operator's events stream as server-sent events (thin)."""

from __future__ import annotations

import msgspec
from aiohttp import web

from bot.events import Event
from http_edge.credentials import OPERATOR_ID
from operator_api.deps import OPERATOR_API
from operator_api.openapi import Endpoints, errors, query
from operator_api.schemas import ref
from operator_api.sse import SSE_HEADERS, last_event_id

endpoints = Endpoints()
routes = endpoints.routes
PING = b": ping\n\n"


def encode_event(event: Event) -> bytes:
    """One SSE event from its frame's Struct (bot.contracts.events; the frame carries its id)."""
    return b"id: %d\ndata: %s\n\n" % (event.id, msgspec.json.encode(event.frame))


@endpoints.get(
    "/api/operator/events",
    "The operator's events stream (SSE): task, result, session; resume with Last-Event-ID",
    {
        "200": {
            "description": "text/event-stream of Event objects; `: ping` heartbeats",
            "content": {"text/event-stream": {"schema": ref("Event")}},
        },
        **errors(400, 401),
    },
    params=[query("last_event_id", {"type": "integer"}, "instead of the Last-Event-ID header")],
)
async def operator_events(request: web.Request) -> web.StreamResponse:
    """Task changes, task results and session changes for this operator. Without
    `Last-Event-ID` the stream starts now; with it, it replays what came after that id."""
    resume = "Last-Event-ID" in request.headers or "last_event_id" in request.query
    after = last_event_id(request) if resume else None
    api = request.app[OPERATOR_API]
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(request)
    events = api.events.stream(
        request[OPERATOR_ID], after=after, heartbeat=api.settings.heartbeat_seconds
    )
    try:
        async for event in events:
            await response.write(PING if event is None else encode_event(event))
    except (ConnectionResetError, ConnectionError):
        pass  # the client left
    finally:
        await events.aclose()
    return response
