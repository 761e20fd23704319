"""GET /api/operator/events: the operator's events stream as server-sent events (thin).

Once the headers are sent, a failure can no longer be a JSON error: a log that cannot be read
(Redis failed) ends the stream, with one line in the log. The contract has no error frame;
an ended stream is what a browser's EventSource and the TUI re-open by themselves, with
Last-Event-ID, so they miss nothing. Before the headers the same failure is a 503.

The credential that opened a stream is checked again, fresh from the database, before the
first event or heartbeat written once two heartbeats have passed since the last check (busy
or quiet, a stream writes one at least every heartbeat): a token revoked or rotated
(`steelframe operator revoke|rotate`) or a browser signed out ends the stream within about
two heartbeats, and the client's re-open is then refused with the 401 any request gets,
which says why.
"""

from __future__ import annotations

import asyncio
import logging

import msgspec
from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from bot.errors import Unauthorized, Unavailable
from bot.events import Event
from http_edge.credentials import OPERATOR_ID, RECHECK, Recheck
from http_edge.request_ids import REQUEST_ID
from operator_api.deps import OPERATOR_API
from operator_api.open_streams import OPEN_STREAMS
from operator_api.openapi import Endpoints, errors, query
from operator_api.schemas import ref
from operator_api.sse import failure_reason, last_event_id, sse_response, start_stream

endpoints = Endpoints()
routes = endpoints.routes
PING = b": ping\n\n"
log = logging.getLogger(__name__)


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
        **errors(400, 401, 503),
    },
    params=[query("last_event_id", {"type": "integer"}, "instead of the Last-Event-ID header")],
)
async def operator_events(request: web.Request) -> web.StreamResponse:
    """Task changes, task results and session changes for this operator. Without
    `Last-Event-ID` the stream starts now; with it, it replays what came after that id."""
    resume = "Last-Event-ID" in request.headers or "last_event_id" in request.query
    after = last_event_id(request) if resume else None
    api = request.app[OPERATOR_API]
    operator_id = request[OPERATOR_ID]
    position = await api.events.start_at(operator_id, after=after)  # Redis down: a 503
    response = sse_response(request)
    if not await start_stream(request, response):
        return response  # a HEAD: headers only, and no subscription
    heartbeat = api.settings.heartbeat_seconds
    events = api.events.stream(operator_id, after=position, heartbeat=heartbeat)
    recheck = request[RECHECK]

    async def write_events() -> None:
        loop = asyncio.get_running_loop()
        checked_at = loop.time()
        try:
            if after is None:
                # Where "now" is, as an `id:` line without data: a browser's EventSource
                # keeps it as its Last-Event-ID, so a stream that breaks before its first
                # event re-opens from here instead of from a later "now".
                await response.write(b"id: %d\n\n" % position)
            async for event in events:
                # By the clock, not on a heartbeat: events coming faster than the
                # heartbeat leave none, and the credential is checked all the same.
                if loop.time() - checked_at >= 2 * heartbeat:
                    checked_at = loop.time()
                    if not await _still_let_in(recheck, request):
                        return  # ended: the client's re-open gets its 401
                await response.write(PING if event is None else encode_event(event))
        finally:
            await events.aclose()

    try:
        await request.app[OPEN_STREAMS].pump(write_events())  # ended early by a shutdown
    except Unavailable as exc:
        log.warning(
            "%s %s: events stream ended, Redis failed (%s); the client re-opens it "
            "with Last-Event-ID [%s]",
            request.method,
            request.path,
            failure_reason(exc),
            request[REQUEST_ID],
        )
    except (ConnectionResetError, ConnectionError):
        pass  # the client left
    except Exception:
        # Any other error past the headers ends the stream the same way (aiohttp would
        # keep it open with nothing more to come); the client re-opens it.
        log.exception(
            "%s %s: events stream ended by an error; the client re-opens it [%s]",
            request.method,
            request.path,
            request[REQUEST_ID],
        )
    return response


async def _still_let_in(recheck: Recheck, request: web.Request) -> bool:
    """Whether the stream's credential still opens the API. A database that cannot say now
    keeps the stream (its next check asks again): only a refusal ends it."""
    try:
        await recheck()
    except Unauthorized as exc:
        log.info(
            "%s %s: events stream ended, its credential no longer opens the API (%s) [%s]",
            request.method,
            request.path,
            exc,
            request[REQUEST_ID],
        )
        return False
    except (SQLAlchemyError, Unavailable) as exc:
        log.debug("events stream: its credential could not be checked now (%s)", exc)
    return True
