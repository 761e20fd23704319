"""Driving the TUI headless in tests: the app against a service, waits, and what it shows."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any

import msgspec
from aiohttp import web
from textual.css.model import RuleSet
from textual.css.stylesheet import Stylesheet
from textual.css.types import CSSLocation
from textual.pilot import Pilot

from steelframe.server import AppPlugin, default_plugins
from tests.conftest import ApiClient
from tests.fakes.service_middleware import Handler, ServiceMiddleware
from tui_client.api import OperatorClient
from tui_client.app import SteelframeApp
from tui_client.chat import SessionItem
from tui_client.sessions_wire import ChatResponse, ListedSession, Session
from tui_client.tasks_wire import BoardTask, TaskDetail
from tui_client.transcript import AssistantMessage, Notice, UserMessage

SIZE = (120, 40)

# Every app parses all its CSS (the app's, each widget class's defaults) into rule sets, and
# again when its theme sets the variables: some 0.1 CPU-s an app, for the same text every
# time in a test process. Textual caches the parses per stylesheet; here, per process too,
# keyed on the variables as well (what a parse substitutes). The rule sets are only read
# once parsed (Textual itself shares them between the parses of one stylesheet).
_PARSED_CSS: dict[tuple[object, ...], list[RuleSet]] = {}
_parse_css_rules = Stylesheet._parse_rules


def _parse_css_rules_once(
    self: Stylesheet,
    css: str,
    read_from: CSSLocation,
    is_default_rules: bool = False,
    tie_breaker: int = 0,
    scope: str = "",
) -> list[RuleSet]:
    key = (css, read_from, is_default_rules, tie_breaker, scope, tuple(self._variables.items()))
    rules = _PARSED_CSS.get(key)
    if rules is None:
        rules = _parse_css_rules(self, css, read_from, is_default_rules, tie_breaker, scope)
        _PARSED_CSS[key] = rules
    return rules


Stylesheet._parse_rules = _parse_css_rules_once  # type: ignore[method-assign]

# Only a hang deadline: a passing wait takes milliseconds in a quiet run, and seconds on a
# machine loaded 15-20 where this file ran 20 times slower (30 s was seen to run out there).
WAIT_SECONDS = 120.0


class HeldNewChat(ServiceMiddleware):
    """The real service, with its answer to `POST /chat/new` held until `release` is set
    (then answered, or refused with a 503 when `refuse`): a test acts while a new chat is
    being created, deterministically. Pass `plugins()` to `api_factory`."""

    PATH = "/api/operator/chat/new"

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.refuse = False

    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and request.path == self.PATH:
            self.asked.set()
            await self.release.wait()
            if self.refuse:  # answered as the error middleware answers any 503
                raise web.HTTPServiceUnavailable(reason="new chats are refused by the test")
        response: web.StreamResponse = await handler(request)
        return response


# What an aiohttp StreamResponse writes with (`response.write`).
Write = Callable[[bytes | bytearray | memoryview], Coroutine[Any, Any, None]]


def is_frame(data: bytes | bytearray | memoryview) -> bool:
    """A written chunk is one of the turn's numbered frames (not a heartbeat)."""
    return bytes(data).startswith(b"id:")


def after_first_frame(
    write: Write, extra: bytes, *, sent: Callable[[], None] = lambda: None
) -> Write:
    """`write`, with `extra` written right after the first frame (then `sent` is called)."""
    first = True

    async def write_then_extra(data: bytes | bytearray | memoryview) -> None:
        nonlocal first
        await write(data)
        if first and is_frame(data):
            first = False
            await write(extra)
            sent()

    return write_then_extra


class ChatStreamWrites(ABC):
    """The real service, what its chat streams (a turn's POST, a re-attach's GET) write
    passed through `rewrite`. Pass `plugins()` to `api_factory`."""

    PATH = "/api/operator/chat/stream"

    def plugins(self) -> tuple[AppPlugin, ...]:
        return (*default_plugins(), AppPlugin(self._setup))

    def _setup(self, app: web.Application) -> None:
        app.on_response_prepare.append(self._prepare)

    async def _prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        if request.path != self.PATH or response.content_type != "text/event-stream":
            return
        rewritten = self.rewrite(request, response.write)
        if rewritten is not None:
            response.write = rewritten  # type: ignore[method-assign,assignment]

    @abstractmethod
    def rewrite(self, request: web.Request, write: Write) -> Write | None:
        """What the stream answering `request` writes through, or None: the service's."""


class NewerChatStream(ChatStreamWrites):
    """The real service, its chat streams read as a newer service's would be: after a turn's
    first frame come `extra` events (whole SSE events, without an id: they are not part of
    the turn's numbering, so a re-attach resumes as it would without them). Pass `plugins()`
    to `api_factory`, and read it with a client that does not check the answers against
    this service's OpenAPI document (`plain_tui`): what it adds is not in it."""

    def __init__(self, *extra: dict[str, Any]) -> None:
        self.extra = sse_events(*extra)
        self.sent = 0  # streams the extra events went into

    def rewrite(self, request: web.Request, write: Write) -> Write:
        return after_first_frame(write, self.extra, sent=self._count)

    def _count(self) -> None:
        self.sent += 1


def sse_events(*frames: dict[str, Any]) -> bytes:
    """Whole SSE events of `frames`, without ids."""
    return b"".join(b"data: %s\n\n" % msgspec.json.encode(frame) for frame in frames)


def plain_tui(api: ApiClient) -> SteelframeApp:
    """The TUI on the service, its answers unchecked against the OpenAPI document."""
    return SteelframeApp(OperatorClient(str(api.raw.make_url("")).rstrip("/"), api.token))


def user_messages(app: SteelframeApp) -> list[str]:
    return [message.text for message in app.query(UserMessage)]


async def stored_user_messages(api: ApiClient, session_id: str | None) -> list[str]:
    """What the service stored as the operator's messages in that session."""
    session = await (await api.get(f"/api/operator/chat/session/{session_id}")).json()
    return [m["content"] for m in session["messages"] if m["role"] == "user"]


def tui(api: ApiClient, *, token: str | None = None, url: str | None = None) -> SteelframeApp:
    return SteelframeApp(api.operator_client(token=token, url=url))


async def until(
    pilot: Pilot[None], check: Callable[[], bool], what: str | Callable[[], str]
) -> None:
    """Poll the running app (short sleeps let its workers and the service progress) until
    `check` holds once the app has settled: every widget has handled what was sent to it
    and the screen is laid out (`pilot.pause`). `what` (or what it returns, at the time of
    failure) says what did not happen.

    Settling costs the app a message to each widget and a layout, some 3 ms of CPU: done at
    each poll it made the TUI tests CPU-bound on a loaded machine (the longer a wait, the
    more polls). So the polls are plain sleeps, and the app is settled only to confirm a
    `check` that holds (if it no longer does, the polling goes on)."""
    if check():
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while True:
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for: {what() if callable(what) else what}")
        await asyncio.sleep(0.02)
        if check():
            await pilot.pause(0)
            if check():
                return


def status(app: SteelframeApp) -> str:
    return app.chat.status_text()


def replies(app: SteelframeApp) -> list[AssistantMessage]:
    return list(app.chat.transcript.query(AssistantMessage))


def notices(app: SteelframeApp) -> list[str]:
    return [notice.text for notice in app.query(Notice)]


def session_titles(app: SteelframeApp) -> list[str]:
    return [item.title for item in app.chat.sessions.query(SessionItem)]


def turn_over(app: SteelframeApp, message: AssistantMessage) -> bool:
    """The turn's reply is fully shown (hits row, Decision draft, notices) and its worker
    has finished: the panel takes the next message."""
    return not message.streaming and not app.chat.state.busy


async def ready(pilot: Pilot[None], app: SteelframeApp) -> None:
    """Start-up requests answered (the events stream runs for as long as the app does)."""
    await until(
        pilot,
        lambda: not any(w.is_running for w in app.workers if w.group != "events"),
        "start-up requests",
    )


async def send(
    pilot: Pilot[None], app: SteelframeApp, text: str, *, wait: bool = True
) -> AssistantMessage:
    # The new reply by identity, not by count: a transcript being cleared (a new chat
    # opening) may still hold replies that go while this one comes.
    shown = replies(app)

    def new_reply() -> AssistantMessage | None:
        last = replies(app)[-1:]
        return last[0] if last and not any(last[0] is old for old in shown) else None

    app.chat.composer.focus()
    app.chat.composer.value = text
    await pilot.press("enter")
    await until(pilot, lambda: new_reply() is not None, "the reply to appear")
    message = replies(app)[-1]
    if wait:
        await until(pilot, lambda: turn_over(app, message), "the turn to end")
    return message


# A task as the service sends it with nothing done yet; the views' tests change what they show.
_BOARD_TASK: dict[str, Any] = {
    "id": 1,
    "repo": "o/r",
    "issue": 4,
    "title": "",
    "state": "queued",
    "archived": False,
    "pr_url": None,
    "cost_usd": 0.0,
    "tokens": 0,
    "last_event": None,
    "updated_at": "2026-01-01T00:00:00+00:00",
    "pr_state": None,
    "review": {"open": 0, "addressed": 0, "declined": 0, "needs_operator": 0, "summary": ""},
    "ready_for_review": False,
    "question": None,
}
_TASK_DETAIL: dict[str, Any] = {
    **_BOARD_TASK,
    "origin_session": None,
    "generation": 1,
    "attempts": 0,
    "branch": None,
    "pr_number": None,
    "last_error": None,
    "summary": None,
    "runtime_session": None,
    "usage": {"tokens": 0, "cost_usd": 0.0, "runtime_seconds": 0.0},
    "created_at": "2026-01-01T00:00:00+00:00",
    "blocked": [],
    "lease": None,
    "events": [],
    "review_threads": [],
    "plan": None,
    "held": None,
    "estimate": None,
    "offered": [],
    "draft": None,
    "ci": [],
}


def board_task(**fields: Any) -> BoardTask:
    """A board task with `fields` set (nested objects as the JSON has them)."""
    return msgspec.convert({**_BOARD_TASK, **fields}, BoardTask)


def task_detail(**fields: Any) -> TaskDetail:
    """A task's detail with `fields` set (nested objects as the JSON has them)."""
    return msgspec.convert({**_TASK_DETAIL, **fields}, TaskDetail)


THREAD: dict[str, Any] = {
    "kind": "review",
    "root_id": 1,
    "pr_number": 5,
    "path": None,
    "line": None,
    "author": "",
    "state": "open",
    "commit": None,
    "reason": None,
    "url": None,
    "picked_at": None,
    "excerpt": "",
    "created_at": "",
    "updated_at": "",
}


_SESSION: dict[str, Any] = {
    "id": "s1",
    "title": None,
    "label": "",
    "kind": "chat",
    "agent": "default",
    "focus": None,
    "created_at": "2026-01-01T00:00:00+00:00",
    "last_activity_at": "2026-01-01T00:00:00+00:00",
    "closed_at": None,
    "summary": None,
    "summary_status": "none",
    "decision": None,
    "pending": None,
    "turns": None,
    "active": False,
}


def listed_session(**fields: Any) -> ListedSession:
    """A session as the sidebar lists it, with `fields` set."""
    return msgspec.convert({**_SESSION, "unseen": False, **fields}, ListedSession)


def chat_session(**fields: Any) -> Session:
    """A session with its messages, with `fields` set (nested objects as the JSON has them)."""
    return msgspec.convert({**_SESSION, "messages": [], "turn_in_flight": None, **fields}, Session)


_RESPONSE: dict[str, Any] = {
    "reply": "",
    "intent": "chat",
    "session": "s1",
    "turn_id": "t1",
    "agent": "default",
    "focus": None,
    "history": [],
    "retrieve_hits": 0,
    "retrieved": [],
    "retrieval_available": True,
    "memory_verdict": "answers",
    "reasoning": "",
    "model": "m",
    "usage": {"input_tokens": 0, "output_tokens": 0},
    "decision_body": None,
    "decision_issue": None,
    "pending_title": None,
    "pending_body": None,
    "pending_kind": None,
    "filed_issue_number": None,
    "filed_issue_url": None,
    "filed_task_started": False,
    "notes": [],
}


def chat_response(**fields: Any) -> ChatResponse:
    """A `done` frame's response, with `fields` set (nested objects as the JSON has them)."""
    return msgspec.convert({**_RESPONSE, **fields}, ChatResponse)


class HeldAnswers(ServiceMiddleware):
    """The real service, its answers to `method path` (a GET unless told) counted (`asked`)
    and, while `holding`, held once the service has made them (so they say what was so when
    asked; what a POST does is done) until `release` is set: a test acts while the TUI waits
    for an answer, as on a slow service. `held` is how many wait now, `most_held` the most
    that waited at once (more than one: the TUI asked again beside a request in flight).
    Every request goes through `inner` first when given (another fake of the service, e.g.
    `WithoutEvents`). Pass `plugins()` to `api_factory`; `path` may be set later (a
    session's, once it exists)."""

    def __init__(
        self, path: str, *, method: str = "GET", inner: ServiceMiddleware | None = None
    ) -> None:
        self.path = path
        self.method = method
        self.inner = inner
        self.asked = 0
        self.holding = False
        self.release = asyncio.Event()
        self.held = 0
        self.most_held = 0

    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        ours = request.method == self.method and request.path == self.path
        if ours:
            self.asked += 1
        if self.inner is not None:
            response = await self.inner.around(request, handler)
        else:
            response = await handler(request)
        if ours and self.holding:
            self.held += 1
            self.most_held = max(self.most_held, self.held)
            try:
                await self.release.wait()
            finally:
                self.held -= 1
        return response


class Outage:
    """A loopback TCP proxy to the service that can go `down` (its connections cut, new ones
    closed as they come) and come back `up` at the same address: the network lost, or the
    service restarting, as a client sees it (the service itself, and its turns, run on)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.is_down = False
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        self.down()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def down(self) -> None:
        self.is_down = True
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    def up(self) -> None:
        self.is_down = False

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.is_down:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while chunk := await src.read(65536):
                    dst.write(chunk)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


class RefusedPath(ServiceMiddleware):
    """The real service, its answers to `GET path` refused with a 503 (as the error
    middleware answers one: the database away) while `refusing` is set. Pass `plugins()` to
    `api_factory`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.refusing = True

    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.refusing and request.method == "GET" and request.path == self.path:
            raise web.HTTPServiceUnavailable(reason="the database is away (the test's)")
        response: web.StreamResponse = await handler(request)
        return response


class HeldSend(ServiceMiddleware):
    """The real service, a turn's `POST /chat/stream` held before the service sees it until
    `release` is set (`asked` is set when it arrives): a slow service, or one the send is
    still on its way to, deterministically. The stops it answers are counted (`stops`).
    Pass `plugins()` to `api_factory`."""

    PATH = "/api/operator/chat/stream"

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.stops = 0

    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and request.path == self.PATH:
            self.asked.set()
            await self.release.wait()
        response: web.StreamResponse = await handler(request)
        if request.path == "/api/operator/chat/stop":
            self.stops += 1
        return response
