"""Server-sent events framing for chat turns: `id:` + one JSON `data:` line per frame.

A disconnecting client only stops its own subscription; the turn goes on (see
bot.chat.inflight). Heartbeat comments keep idle connections open through proxies. A turn
relayed from another instance whose Redis fails after the headers ends the stream without a
terminal frame (one line in the log): the turn has not failed, and the clients re-attach
with Last-Event-ID. Any other error past the headers ends it the same way, with its
traceback in the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from aiohttp import hdrs, web

from bot.chat.frames import NumberedFrame
from bot.chat.inflight import TurnHandle
from bot.contracts.chat import DoneFrame
from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest, Unavailable
from bot.params import ascii_int
from http_edge.request_ids import REQUEST_ID, REQUEST_STARTED
from operator_api.deps import OPERATOR_API

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",  # nginx: do not buffer
    "Connection": "keep-alive",
}
HEARTBEAT = b": keep-alive\n\n"
log = logging.getLogger(__name__)


def encode_frame(frame: dict[str, Any]) -> bytes:
    """One SSE event of the events stream: compact UTF-8 JSON (orjson: a tenth of
    `json.dumps`'s cost)."""
    return b"id: %d\ndata: %s\n\n" % (frame["id"], orjson.dumps(frame))


def encode_chat_frame(frame: NumberedFrame) -> bytes:
    """One SSE event of a chat turn: the frame's JSON, encoded once when its turn numbered
    it (bot.contracts.chat.encode_frame), however many clients read it."""
    return b"id: %d\ndata: %s\n\n" % (frame.id, frame.data)


def sse_response(request: web.Request) -> web.StreamResponse:
    """An SSE answer, not yet prepared. It carries the request id as every answer does
    (docs/api.md): the error middleware adds it only to answers still unprepared when the
    handler returns, and a stream is prepared (its headers sent) long before that."""
    response = web.StreamResponse(headers=SSE_HEADERS)
    response.headers["X-Request-Id"] = request[REQUEST_ID]
    return response


async def start_stream(request: web.Request, response: web.StreamResponse) -> bool:
    """Send an SSE answer's headers; whether its events follow. aiohttp serves HEAD on every
    GET route, and a stream wrote its events on a HEAD as on a GET: an endless body where
    RFC 9110 9.3.2 allows none (a keep-alive proxy reads it as the next answer), holding a
    handler and a subscription. A HEAD gets the GET's status and headers, then ends."""
    await response.prepare(request)
    return request.method != hdrs.METH_HEAD


def failure_reason(exc: Unavailable) -> str:
    """Why Redis failed under a stream, for the log line: the detail's `reason`, if any."""
    reason = exc.detail.reason if exc.detail is not None else "?"
    return reason if isinstance(reason, str) else "?"


def last_event_id(request: web.Request) -> int:
    """The frame id a re-attaching client last saw (header, or `last_event_id` query)."""
    raw = request.headers.get("Last-Event-ID") or request.query.get("last_event_id") or "0"
    value = ascii_int(raw)
    if value is None:
        raise BadRequest(
            "Last-Event-ID must be an integer frame id", detail=ErrorDetail(field="Last-Event-ID")
        )
    return value


async def stream_turn(
    request: web.Request, handle: TurnHandle, *, after: int, heartbeat: float
) -> web.StreamResponse:
    frames = handle.subscribe(after=after, heartbeat=heartbeat)
    return await stream_frames(
        request, frames, session_id=handle.session_id, turn_id=handle.turn_id
    )


async def stream_frames(
    request: web.Request,
    frames: AsyncIterator[NumberedFrame | None],
    *,
    session_id: str,
    turn_id: str,
) -> web.StreamResponse:
    """Write a turn's frames as SSE (None: a heartbeat comment) until the terminal one."""
    metrics = request.app[OPERATOR_API].metrics
    response = sse_response(request)
    response.headers["X-Steelframe-Session"] = session_id
    response.headers["X-Steelframe-Turn"] = turn_id
    if not await start_stream(request, response):
        return response
    started = request.get(REQUEST_STARTED, time.monotonic())
    outcome, first = "detached", True
    metrics.chat_streams.inc()
    try:
        async for frame in frames:
            await response.write(HEARTBEAT if frame is None else encode_chat_frame(frame))
            if frame is not None and first:
                metrics.chat_first_frame.observe(time.monotonic() - started)
                first = False
            if frame is not None and frame.terminal:
                outcome = "done" if isinstance(frame.frame, DoneFrame) else "error"
    except Unavailable as exc:
        log.warning(
            "%s %s: turn %s stream ended, Redis failed (%s); the client re-attaches with "
            "Last-Event-ID [%s]",
            request.method,
            request.path,
            turn_id,
            failure_reason(exc),
            request[REQUEST_ID],
        )
    except (ConnectionResetError, ConnectionError):
        return response  # the client left; the turn continues detached
    except Exception:
        # Past the headers an error can no longer be a JSON answer, and left to aiohttp it
        # kept the stream open with nothing more to come. End it as a Redis failure does:
        # the turn has not failed (its frames are where they were), and the client
        # re-attaches with Last-Event-ID.
        log.exception(
            "%s %s: turn %s stream ended by an error; the client re-attaches [%s]",
            request.method,
            request.path,
            turn_id,
            request[REQUEST_ID],
        )
    finally:
        metrics.chat_streams.dec()
        metrics.chat_turns.labels(outcome).inc()
    return response
