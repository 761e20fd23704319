"""The operator API over HTTP (aiohttp): the only way the TUI reads or changes anything.

Errors come back as exceptions the app can show as they are: `ServiceUnreachable` (no
connection, or it broke), `ApiError` (the service answered `{"error","code","detail"}`,
read as `ErrorBody`, its detail as `ErrorDetail`) and `UnexpectedAnswer` (an answer that is
not the JSON this TUI reads).
Every answer is decoded into a Struct, never handed on as untyped JSON: the board and task
answers into those of `tui_client/tasks_wire.py`, the chat sessions, a turn's frames and the
answers to seen, delete, stop, publish and file into those of `tui_client/sessions_wire.py`,
the events stream's frames into `tui_client/events_wire.py`, an error's detail into
`tui_client/errors_wire.py`'s, all generated from the service's own (bot/contracts/tasks.py,
chat.py, actions.py, events.py, errors.py); each answer and each
SSE frame is decoded once, by its type's decoder.
A turn's SSE stream that breaks mid-turn is re-attached from the last frame id it saw.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import aiohttp
import msgspec

from tui_client import turn_frames
from tui_client.errors_wire import ErrorDetail
from tui_client.events_wire import EventFrame
from tui_client.sessions_wire import (
    Deleted,
    Filed,
    ListedSession,
    NewSession,
    Published,
    Seen,
    Session,
    Sessions,
    StopResult,
)
from tui_client.sse import SseError, SseReader
from tui_client.tasks_wire import Board, TaskDetail, TaskLog
from tui_client.turn_frames import NumberedFrame

log = logging.getLogger(__name__)
T = TypeVar("T")
DEFAULT_TIMEOUT = aiohttp.ClientTimeout(total=30, connect=5)
# A turn streams for as long as the model takes; the server sends heartbeats while it is idle.
STREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=5, sock_read=120)
RESUME_ATTEMPTS = 2
# The pause before a turn's re-attach (doubled for the next): a 503 there means Redis is
# away for a moment (a restart or a fail-over), so asking again at once would only fail again.
RESUME_BACKOFF = 0.5
EVENTS_BACKOFF_MIN = 0.5
EVENTS_BACKOFF_MAX = 30.0
# Answers that say "not now" rather than "never" (the service's Redis away, a proxy between):
# a stream answered so is re-opened like a broken one; any other error status is final.
TRANSIENT_STATUSES = frozenset({502, 503, 504})
# A request's JSON body, built here from the typed arguments of the method that sends it.
JsonBody = dict[str, Any]


class Keep(enum.Enum):
    """A turn's focus argument meaning "leave the session's focus as it is" (not sent)."""

    KEEP = enum.auto()


KEEP: Final = Keep.KEEP


class ServiceUnreachable(Exception):
    """No answer from the service (refused, reset, timed out, or not HTTP)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the Steelframe service at {url}: {reason}")
        self.url = url
        self.reason = reason


class ErrorBody(msgspec.Struct, frozen=True):
    """The JSON of every error answer: `{"error": message, "code", "detail"}`. Declared
    here, not copied (bot/contracts/errors.py's requires `code`): it also reads a body
    without one. The detail is the generated copy (tui_client/errors_wire.py)."""

    error: str
    code: str | None = None  # None or absent: "http_error"
    detail: ErrorDetail | None = None


class _ErrorHead(msgspec.Struct, frozen=True):
    """An error answer's message and code alone, for a `detail` of a shape `ErrorDetail`
    does not read (a newer service's): the error still shows, without it."""

    error: str
    code: str | None = None


class ApiError(Exception):
    """The service answered with an error status and its JSON error body."""

    def __init__(
        self, status: int, code: str, message: str, detail: ErrorDetail | None = None
    ) -> None:
        super().__init__(f"{message} ({status} {code})")
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail

    @property
    def unauthorized(self) -> bool:
        return self.status == 401


@dataclass(frozen=True)
class LiveStatus:
    """How the events stream is doing, for the app to show: `live` once a stream is open;
    otherwise why it is not (`reason`) and how long until the next try (`retry_in`)."""

    live: bool
    reason: str = ""
    retry_in: float = 0.0


class UnexpectedAnswer(Exception):
    """The service answered, but not with what this TUI reads there (a key it needs is
    missing or of another type: a service much older or newer than the TUI)."""


REQUEST_ERRORS = (ApiError, ServiceUnreachable, UnexpectedAnswer)


@dataclass
class _ChatStream:
    """One turn's stream as the client follows it: the turn the service named (a header),
    and whether the turn's terminal frame arrived."""

    turn: str | None = None
    ended: bool = False


class OperatorClient:
    """One operator's view of the service. The aiohttp session is made on first use, so the
    client can be built before the event loop runs; `close()` releases it."""

    def __init__(
        self, base_url: str, token: str, *, session_options: dict[str, Any] | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._http: aiohttp.ClientSession | None = None
        # Extra aiohttp.ClientSession options (the test suite passes a response class that
        # checks every answer against the service's OpenAPI document).
        self._session_options = dict(session_options or {})

    def __repr__(self) -> str:
        return f"OperatorClient({self.base_url!r}, token=***)"

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(
                # The client's name labels what it files (`steelframe:from-tui`).
                headers={"Authorization": f"Bearer {self._token}", "X-Steelframe-Client": "tui"},
                timeout=DEFAULT_TIMEOUT,
                # Bodies as UTF-8: json.dumps' default escaped every non-ASCII character as
                # \uXXXX (six bytes, twelve for an emoji), so a message of CJK text hit the
                # body limit at a third of the characters the service takes.
                json_serialize=_utf8_json,
                **self._session_options,
            )
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def request(
        self,
        kind: type[T],
        method: str,
        path: str,
        *,
        body: JsonBody | None = None,
        params: dict[str, str] | None = None,
    ) -> T:
        """The answer decoded as `kind` (checked here, at run time; unknown keys ignored)."""
        raw = await self._answer(method, path, body=body, params=params)
        try:
            return msgspec.json.decode(raw, type=kind)
        except msgspec.DecodeError as exc:  # not JSON, or not `kind` (ValidationError)
            raise UnexpectedAnswer(f"{method} {path}: {exc}") from exc

    async def _answer(
        self,
        method: str,
        path: str,
        *,
        body: JsonBody | None = None,
        params: dict[str, str] | None = None,
    ) -> bytes:
        """The body of a successful answer; an error status raises its ApiError."""
        url = self.base_url + path
        try:
            async with self._session().request(method, url, json=body, params=params) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise _api_error(response.status, response.reason or "", raw)
                return raw
        except aiohttp.ClientResponseError as exc:
            raise ApiError(exc.status, "http_error", exc.message) from exc
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ServiceUnreachable(self.base_url, _reason(exc)) from exc

    # -- chat ----------------------------------------------------------------------------

    async def sessions(self) -> list[ListedSession]:
        listed = await self.request(Sessions, "GET", "/api/operator/chat/sessions")
        return listed.sessions

    async def new_session(
        self, *, title: str | None = None, issue: int | None = None
    ) -> NewSession:
        body: JsonBody = {}
        if title:
            body["title"] = title
        if issue is not None:
            body["issue"] = issue
        return await self.request(NewSession, "POST", "/api/operator/chat/new", body=body)

    async def session(self, session_id: str) -> Session:
        """The session's messages, Decision draft and pending proposal (reading only)."""
        return await self.request(Session, "GET", f"/api/operator/chat/session/{session_id}")

    async def mark_seen(self, session_id: str) -> Seen:
        """The operator saw this session's task results (its sidebar dot goes, server-side)."""
        return await self.request(Seen, "POST", f"/api/operator/chat/session/{session_id}/seen")

    async def open_session(self, session_id: str) -> Session:
        """Reopen: as `session`, and the next message goes to it (POST .../open)."""
        path = f"/api/operator/chat/session/{session_id}/open"
        return await self.request(Session, "POST", path)

    async def delete_session(self, session_id: str) -> Deleted:
        path = f"/api/operator/chat/session/{session_id}"
        return await self.request(Deleted, "DELETE", path)

    async def stop(self) -> StopResult:
        """Stop this operator's turn in flight (`stopped` false: there was none)."""
        return await self.request(StopResult, "POST", "/api/operator/chat/stop")

    async def publish_decision(
        self, *, issue: int, body: str, session_id: str | None, request_id: str | None = None
    ) -> Published:
        """Publish; `request_id` (one per press of P) makes a retry post nothing more."""
        payload: JsonBody = {"issue": issue, "body": body}
        if session_id:
            payload["session_id"] = session_id
        if request_id:
            payload["request_id"] = request_id
        path = "/api/operator/chat/decision"
        return await self.request(Published, "POST", path, body=payload)

    async def file_pending(self, *, session_id: str | None) -> Filed:
        """File the session's pending proposal (the one `pending_title` names)."""
        payload = {"session": session_id} if session_id else {}
        return await self.request(Filed, "POST", "/api/operator/chat/file", body=payload)

    async def turn(
        self,
        message: str,
        *,
        session_id: str | None = None,
        focus: int | Keep | None = KEEP,
        key: str | None = None,
    ) -> AsyncIterator[NumberedFrame]:
        """The frames of one turn, ending with `done` or `error` (tui_client/turn_frames.py
        decodes them; a frame type this TUI does not know is skipped there). A stream that
        breaks before its terminal frame is re-attached (GET .../chat/stream) from the last
        frame id seen, so no frame is lost or doubled. `focus`: an issue number, None to
        clear, or KEEP. `key`: the message's idempotency key (one per message sent, the
        same when it is sent again): with it, a send whose answer never came is sent again,
        and the service runs one turn for it whatever happened to the first (docs/api.md)."""
        body: JsonBody = {"message": message}
        if session_id:
            body["session"] = session_id
        if focus is not KEEP:
            body["focus"] = focus
        reader = SseReader(turn_frames.decode)
        stream = _ChatStream()
        sent: dict[str, Any] = {"body": body}
        if key is not None:
            sent["headers"] = {"Idempotency-Key": key}
        method, request = "POST", sent
        broken: ServiceUnreachable | ApiError = ServiceUnreachable(
            self.base_url, "the stream ended before the turn did"
        )
        pause = RESUME_BACKOFF
        for attempt in range(1 + RESUME_ATTEMPTS):
            if attempt:
                if not stream.turn and key is None:
                    break  # the service never accepted the turn: nothing to re-attach to
                await asyncio.sleep(pause)
                pause *= 2
                if stream.turn:
                    log.info(
                        "re-attaching to turn %s after frame %s",
                        stream.turn,
                        reader.last_event_id,
                    )
                    params = {"turn": stream.turn, "last_event_id": str(reader.last_event_id)}
                    method, request = "GET", {"params": params}
                else:  # no answer came: sent again with its key, it runs no second turn
                    log.info("sending the message again with its key")
                reader.reset()
            try:
                async for frame in self._frames(method, reader, stream, **request):
                    yield frame
            except ServiceUnreachable as exc:
                broken = exc
            except ApiError as exc:
                # A 503 (the turn runs on another instance and Redis is away for now) is one
                # failed attempt, as a broken connection is; any other refusal is final.
                if exc.status not in TRANSIENT_STATUSES:
                    raise
                broken = exc
            if stream.ended:
                return
        raise broken

    async def resume(
        self, session_id: str, *, last_event_id: int = 0
    ) -> AsyncIterator[NumberedFrame]:
        """Re-attach to the session's in-flight (or just finished) turn."""
        reader = SseReader(turn_frames.decode)
        reader.last_event_id = last_event_id
        params = {"session": session_id, "last_event_id": str(last_event_id)}
        async for frame in self._frames("GET", reader, _ChatStream(), params=params):
            yield frame

    async def _frames(
        self,
        method: str,
        reader: SseReader[NumberedFrame],
        stream: _ChatStream,
        *,
        body: JsonBody | None = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> AsyncIterator[NumberedFrame]:
        """A turn's frames from the chat stream, up to and including its terminal one."""
        url = self.base_url + "/api/operator/chat/stream"
        try:
            async with self._session().request(
                method, url, json=body, params=params, headers=headers, timeout=STREAM_TIMEOUT
            ) as response:
                if response.status >= 400:
                    raise _api_error(response.status, response.reason or "", await response.read())
                stream.turn = response.headers.get("X-Steelframe-Turn") or stream.turn
                async for chunk in response.content.iter_any():
                    for frame in reader.feed(chunk):
                        yield frame
                        if frame.terminal:
                            stream.ended = True
                            return
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ServiceUnreachable(self.base_url, _reason(exc)) from exc

    # -- events --------------------------------------------------------------------------

    async def events(
        self,
        *,
        last_event_id: int | None = None,
        on_status: Callable[[LiveStatus], None] | None = None,
    ) -> AsyncIterator[EventFrame]:
        """The operator's events stream, forever: a broken connection, or a 502/503/504 (the
        service's Redis away for a while), is re-opened after a pause that doubles up to
        EVENTS_BACKOFF_MAX, from the last event id seen, so nothing is missed; a `resync`
        frame says some were (reload what is shown). `on_status` hears each change (open,
        or waiting to re-open and why). Any other error status raises its ApiError. A frame
        this client does not know (a newer service's) is skipped, as the TUI has nothing to
        show for it."""
        reader: SseReader[EventFrame] = SseReader(_event_frame)
        position = last_event_id
        pause = EVENTS_BACKOFF_MIN
        tell = on_status or (lambda status: None)
        while True:
            headers = {} if position is None else {"Last-Event-ID": str(position)}
            try:
                async with self._session().get(
                    self.base_url + "/api/operator/events", headers=headers, timeout=STREAM_TIMEOUT
                ) as response:
                    if response.status >= 400:
                        raise _api_error(
                            response.status, response.reason or "", await response.read()
                        )
                    pause = EVENTS_BACKOFF_MIN
                    tell(LiveStatus(live=True))
                    async for chunk in response.content.iter_any():
                        frames = reader.feed(chunk)
                        # The reader's position, not the last frame's: a stream opened
                        # without Last-Event-ID starts with an `id: N` line and no data,
                        # and one that breaks before its first event re-opens from N.
                        if reader.id_seen:
                            position = reader.last_event_id
                        for frame in frames:
                            if self._http is None:  # closed meanwhile: ends with the client
                                return
                            yield frame
                reason = "the service ended the stream"
            except ApiError as exc:
                if exc.status not in TRANSIENT_STATUSES:
                    raise
                reason = f"{exc.message} ({exc.status})"
            except (aiohttp.ClientError, TimeoutError, OSError, RuntimeError) as exc:
                if self._http is None:
                    # This client's `close` took the connection away (a read after it is a
                    # bare RuntimeError from aiohttp): the stream ends with the client.
                    return
                if isinstance(exc, RuntimeError):
                    raise
                reason = _reason(exc)
            log.info("events stream broke (%s); re-opening in %.1f s", reason, pause)
            tell(LiveStatus(live=False, reason=reason, retry_in=pause))
            reader.reset()
            await asyncio.sleep(pause)
            pause = min(pause * 2, EVENTS_BACKOFF_MAX)

    # -- board ---------------------------------------------------------------------------

    async def board(self, *, state: str | None = None) -> Board:
        """The tasks and the coding sandbox's mode (with its warning when isolation is off)."""
        params = {"state": state} if state else None
        return await self.request(Board, "GET", "/api/operator/board", params=params)

    async def task_log(self, task_id: int | str) -> TaskLog:
        """The private, redacted runtime log of the task's runs."""
        return await self.request(TaskLog, "GET", f"/api/operator/tasks/{task_id}/log")

    async def task(self, task_id: int | str) -> TaskDetail:
        """One task with its event log, lease and why it waits (GET /api/operator/tasks/{id})."""
        return await self.request(TaskDetail, "GET", f"/api/operator/tasks/{task_id}")

    async def terminate(self, task_id: int | str) -> TaskDetail:
        return await self.request(TaskDetail, "POST", f"/api/operator/tasks/{task_id}/terminate")

    async def archive(self, task_id: int | str) -> TaskDetail:
        return await self.request(TaskDetail, "POST", f"/api/operator/tasks/{task_id}/archive")


def _api_error(status: int, reason: str, raw: bytes) -> ApiError:
    """The error answer as an ApiError; one that is not the service's JSON (a proxy's page)
    is the status and its reason phrase."""
    try:
        body = _ERROR_BODY.decode(raw)
    except msgspec.DecodeError:  # not JSON, or not an error body (ValidationError)
        try:
            head = _ERROR_HEAD.decode(raw)
        except msgspec.DecodeError:
            return ApiError(status, "http_error", reason or f"HTTP {status}")
        body = ErrorBody(head.error, head.code)
    return ApiError(status, body.code or "http_error", body.error, body.detail)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError):
        detail = exc.os_error.strerror or type(exc.os_error).__name__
        return f"connection refused or no route ({detail})"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection"
    return str(exc) or type(exc).__name__


_ERROR_BODY = msgspec.json.Decoder(ErrorBody)
_ERROR_HEAD = msgspec.json.Decoder(_ErrorHead)
_EVENT_DECODER = msgspec.json.Decoder(EventFrame)


def _event_frame(data: str, event_id: int | None) -> EventFrame | None:
    """An events-stream frame as its Struct (tui_client/events_wire.py), None (skipped) if
    this TUI cannot read it: a newer service's frame type, or a shape it does not know."""
    try:
        frame: EventFrame = _EVENT_DECODER.decode(data)  # checked here, at run time
    except msgspec.ValidationError as exc:
        log.info("events stream: frame %s skipped: %s", event_id, exc)
        return None
    except msgspec.DecodeError as exc:
        raise SseError(f"event data is not JSON: {data[:80]!r}") from exc
    return frame


def _utf8_json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False)
