"""/api/operator/chat*: thin handlers over Chat's turn pipeline (bot.chat.pipeline) and its
session service (bot.chat.session_service)."""

from __future__ import annotations

from aiohttp import web
from msgspec import Struct

from bot.chat.operator_commands import check_command
from bot.chat.pipeline import TurnPipeline
from bot.chat.session_rows import UNSET
from bot.chat.session_service import SessionService
from bot.chat.turn_request import TurnRequest
from bot.chat.unseen import mark_seen
from bot.contracts.chat import (
    MAX_AGENT_NAME_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_SESSION_ID_CHARS,
    Deleted,
    DoneFrame,
    ErrorFrame,
    ErrorReason,
    Sessions,
    encode,
)
from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest, NotFound, SteelframeError
from bot.filing_source import CLIENT_HEADER, bind_client
from http_edge.answers import answered
from http_edge.credentials import OPERATOR_ID
from http_edge.validation import optional_str, query_int, read_json, reject_unknown
from operator_api.deps import OPERATOR_API
from operator_api.openapi import (
    SSE,
    Endpoints,
    errors,
    idempotency_key,
    json_body,
    path_param,
    query,
)
from operator_api.schemas import ref
from operator_api.sse import last_event_id, stream_frames, stream_turn
from operator_api.validation import optional_issue, request_key, session_id

endpoints = Endpoints()
routes = endpoints.routes
SESSION = path_param("session", {"type": "string"})
CHAT_FIELDS = {"message", "session", "agent", "focus", "request_id"}
TURN_KEY = idempotency_key(
    "one key per message sent (scoped to the operator); a send again with it never runs a"
    " second turn: it attaches to that turn, or answers its recorded end"
)
# Blocking-endpoint status for each reason a turn can end in an error frame (docs/api.md);
# any other (cancelled, internal) is a 500.
ERROR_STATUS = {
    ErrorReason.RUNTIME: 502,
    ErrorReason.TIMEOUT: 504,
    ErrorReason.STOPPED: 409,
    ErrorReason.SESSION_DELETED: 404,
    # The service cut the turn, stopping (bot.chat.inflight): send it again, to an instance
    # that runs; the session says the turn did not complete.
    ErrorReason.CANCELLED: 503,
}


class TurnFailed(SteelframeError):
    """A blocking turn that ended in an error frame; its reason picks the status, and the
    error middleware writes the body like every other error's."""

    def __init__(self, message: str, reason: ErrorReason, session: str) -> None:
        super().__init__(message, detail=ErrorDetail(reason=reason, session=session))
        self.status = ERROR_STATUS.get(reason, 500)
        self.code = f"turn_{reason}"


def _turns(request: web.Request) -> TurnPipeline:
    return request.app[OPERATOR_API].chat_turns


def _sessions(request: web.Request) -> SessionService:
    return request.app[OPERATOR_API].chat_sessions


async def _turn_request(request: web.Request) -> TurnRequest:
    bind_client(request.headers.get(CLIENT_HEADER))  # the label of what this turn files
    settings = request.app[OPERATOR_API].settings
    data = await read_json(request, limit=settings.chat_max_body)
    reject_unknown(data, CHAT_FIELDS)
    message = data.get("message")
    if message is None or (isinstance(message, str) and not message.strip()):
        raise _bad("message is required", "message")
    if not isinstance(message, str):
        raise _bad("message must be a string", "message")
    if len(message) > MAX_MESSAGE_CHARS:
        raise _bad(f"message is longer than {MAX_MESSAGE_CHARS} characters", "message")
    check_command(message)  # "discuss #0": refused here, before a turn claims anything
    session = optional_str(data, "session", max_length=MAX_SESSION_ID_CHARS)
    return TurnRequest(
        operator_id=request[OPERATOR_ID],
        message=message,
        session_id=session_id(session) if session is not None else None,
        agent=optional_str(data, "agent", max_length=MAX_AGENT_NAME_CHARS),
        focus=optional_issue(data, "focus"),
        key=request_key(request, data),
    )


def _json(answer: Struct, *, status: int = 200) -> web.Response:
    """A chat contract as the response body (bot.contracts.chat)."""
    return web.Response(body=encode(answer), status=status, content_type="application/json")


def _bad(message: str, field: str) -> BadRequest:
    return BadRequest(message, detail=ErrorDetail(field=field))


@endpoints.post(
    "/api/operator/chat",
    "Blocking chat turn",
    {
        "200": json_body(ref("ChatResponse")),
        **errors(400, 401, 404, 409, 413, 422, 500, 502, 503, 504),
    },
    body=ref("ChatRequest"),
    params=[TURN_KEY],
)
async def chat_blocking(request: web.Request) -> web.Response:
    handle = await _turns(request).send(await _turn_request(request))
    # From here it waits on its own turn, not on the service: no turn should yield to it.
    answered(request)
    final = None
    async for frame in handle.subscribe():
        if frame is not None and frame.terminal:
            final = frame.frame
    if isinstance(final, DoneFrame):
        return _json(final.response)
    failed = final if isinstance(final, ErrorFrame) else ErrorFrame(error="the turn failed")
    raise TurnFailed(failed.error, failed.reason or ErrorReason.INTERNAL, handle.session_id)


@endpoints.post(
    "/api/operator/chat/stream",
    "Streaming chat turn (SSE; 503 while the service is shutting down)",
    {"200": SSE, **errors(400, 401, 404, 409, 413, 422, 503)},
    body=ref("ChatRequest"),
    params=[TURN_KEY],
)
async def chat_stream(request: web.Request) -> web.StreamResponse:
    turn = await _turns(request).send(await _turn_request(request))
    heartbeat = request.app[OPERATOR_API].settings.heartbeat_seconds
    frames = turn.subscribe(after=0, heartbeat=heartbeat)
    return await stream_frames(request, frames, session_id=turn.session_id, turn_id=turn.turn_id)


@endpoints.get(
    "/api/operator/chat/stream",
    "Re-attach to the in-flight turn; replays frames after Last-Event-ID (503: another"
    " instance's turn cannot be found while Redis is unreachable)",
    {"200": SSE, **errors(400, 401, 404, 503)},
    params=[
        query("session", {"type": "string"}, "session id"),
        query("turn", {"type": "string"}, "turn id"),
        query("last_event_id", {"type": "integer"}, "instead of the Last-Event-ID header"),
    ],
)
async def chat_resume(request: web.Request) -> web.StreamResponse:
    """Re-attach to the in-flight (or just finished) turn, from after Last-Event-ID."""
    raw_session = request.query.get("session")
    raw_turn = request.query.get("turn")
    wanted_session = session_id(raw_session) if raw_session else None
    wanted_turn = session_id(raw_turn, "turn", kind="turn") if raw_turn else None
    after = last_event_id(request)
    api = request.app[OPERATOR_API]
    heartbeat = api.settings.heartbeat_seconds
    registry = api.registry
    handle = registry.find(request[OPERATOR_ID], session_id=wanted_session, turn_id=wanted_turn)
    if handle is not None and handle.session_id:
        return await stream_turn(request, handle, after=after, heartbeat=heartbeat)
    # Another instance may run it: its frames come through Redis.
    relay = registry.relay
    relayed = None
    if relay is not None:
        relayed = await relay.locate(
            request[OPERATOR_ID], session_id=wanted_session, turn_id=wanted_turn
        )
    if relay is None or relayed is None:
        raise NotFound("no turn in flight for this session")
    frames = relay.replay(relayed.turn_id, after=after, heartbeat=heartbeat)
    return await stream_frames(
        request, frames, session_id=relayed.session_id, turn_id=relayed.turn_id
    )


@endpoints.get(
    "/api/operator/chat",
    "History of a session (default: the active one)",
    {"200": json_body(ref("History")), **errors(400, 401, 404)},
    params=[
        query("limit", {"type": "integer", "minimum": 1, "maximum": 500}, "last N messages"),
        query("session", {"type": "string"}, "session id"),
    ],
)
async def chat_history(request: web.Request) -> web.Response:
    limit = query_int(request, "limit", default=50, maximum=500)
    raw = request.query.get("session")
    result = await _sessions(request).history(
        request[OPERATOR_ID], session_id=session_id(raw) if raw else None, limit=limit
    )
    return _json(result)


@endpoints.post(
    "/api/operator/chat/stop",
    "Stop this operator's in-flight turn",
    {"200": json_body(ref("StopResult")), **errors(400, 401, 413)},
    body={"type": "object", "additionalProperties": False},
    body_required=False,
)
async def chat_stop(request: web.Request) -> web.Response:
    # It takes no body: one that names a session, or is not JSON, is a mistake to refuse
    # before stopping anything (it would stop the operator's turn wherever it runs).
    reject_unknown(await read_json(request, limit=1024, required=False), set())
    return _json(await _sessions(request).stop(request[OPERATOR_ID]))


@endpoints.post(
    "/api/operator/chat/clear",
    "Clear a session's messages",
    {"200": json_body(ref("Cleared")), **errors(400, 401, 404, 409, 413)},
    body=ref("ClearRequest"),
    body_required=False,
)
async def chat_clear(request: web.Request) -> web.Response:
    data = await read_json(
        request, limit=request.app[OPERATOR_API].settings.chat_max_body, required=False
    )
    reject_unknown(data, {"session"})
    raw = optional_str(data, "session", max_length=MAX_SESSION_ID_CHARS)
    result = await _sessions(request).clear(
        request[OPERATOR_ID], session_id=session_id(raw) if raw else None
    )
    return _json(result)


@endpoints.get(
    "/api/operator/chat/sessions",
    "Sessions, newest activity first",
    {"200": json_body(ref("Sessions")), **errors(401)},
)
async def chat_sessions(request: web.Request) -> web.Response:
    return _json(Sessions(await _sessions(request).list_sessions(request[OPERATOR_ID])))


@endpoints.post(
    "/api/operator/chat/new",
    "Close the open session and start a new one (Discuss with issue: 404 when GitHub does "
    "not have that issue)",
    {"201": json_body(ref("NewSession")), **errors(400, 401, 404, 409, 413, 502, 503)},
    body=ref("NewSessionRequest"),
    body_required=False,
)
async def chat_new(request: web.Request) -> web.Response:
    data = await read_json(
        request, limit=request.app[OPERATOR_API].settings.chat_max_body, required=False
    )
    reject_unknown(data, {"title", "issue", "agent"})
    issue = optional_issue(data, "issue")
    title = optional_str(data, "title", max_length=200)
    session = await _sessions(request).new_session(
        request[OPERATOR_ID],
        title=title.strip() if title and title.strip() else None,
        issue=None if issue is UNSET else issue,
        agent=optional_str(data, "agent", max_length=MAX_AGENT_NAME_CHARS),
    )
    return _json(session, status=201)


@endpoints.get(
    "/api/operator/chat/session/{session}",
    "A session's messages and summary (reading changes nothing)",
    {"200": json_body(ref("Session")), **errors(400, 401, 404)},
    params=[SESSION],
)
async def chat_session_get(request: web.Request) -> web.Response:
    sid = session_id(request.match_info["session"])
    return _json(await _sessions(request).get_session(request[OPERATOR_ID], sid))


@endpoints.post(
    "/api/operator/chat/session/{session}/open",
    "Reopen a session: pin the next message to it (the one left is summarised)",
    {"200": json_body(ref("Session")), **errors(400, 401, 404, 413)},
    params=[SESSION],
    body={"type": "object", "additionalProperties": False},
    body_required=False,
)
async def chat_session_open(request: web.Request) -> web.Response:
    """Reopen: the next message without a `session` goes to this one."""
    sid = session_id(request.match_info["session"])
    data = await read_json(request, limit=1024, required=False)
    reject_unknown(data, set())
    return _json(await _sessions(request).open_session(request[OPERATOR_ID], sid))


@endpoints.post(
    "/api/operator/chat/session/{session}/seen",
    "The operator saw this session's task results (a client showing one live): its sidebar"
    " dot goes (idempotent)",
    {"200": json_body(ref("Seen")), **errors(400, 401, 404, 413)},
    params=[SESSION],
    body={"type": "object", "additionalProperties": False},
    body_required=False,
)
async def chat_session_seen(request: web.Request) -> web.Response:
    sid = session_id(request.match_info["session"])
    reject_unknown(await read_json(request, limit=1024, required=False), set())
    api = request.app[OPERATOR_API]
    return _json(await api.db.run(mark_seen, request[OPERATOR_ID], sid))


@endpoints.delete(
    "/api/operator/chat/session/{session}",
    "Delete a session and its turns (a turn running in it is stopped first)",
    {"200": json_body(ref("Deleted")), **errors(400, 401, 404, 409)},
    params=[SESSION],
)
async def chat_session_delete(request: web.Request) -> web.Response:
    sid = session_id(request.match_info["session"])
    await _sessions(request).delete_session(request[OPERATOR_ID], sid)
    return _json(Deleted(sid))
