"""The Chat panel: session list, transcript, status line and composer (spec: Chat).

All data comes from `OperatorClient`; network work runs in Textual workers, one turn at a
time (`exclusive=True`), and every failure lands in the transcript as a notice, so the app
keeps running whatever the service does.

Over the 500-line rule, on purpose: it is one Textual widget, whose compose, bindings and
`on_*` handlers (dispatched by Textual by name on the widget) share the panel's state; the
frame names it reads come from `tui_client/wire.py`, generated from the service's Structs.
"""

from __future__ import annotations

import enum
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Concatenate, Final, ParamSpec, TypeVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widget import MountError, Widget
from textual.widgets import Input, Label, ListView, Static

from tui_client import wire
from tui_client.api import KEEP, ApiError, OperatorClient, ServiceUnreachable
from tui_client.chat_state import ChatState, status_line
from tui_client.chat_widgets import Composer, SessionItem, SessionList
from tui_client.modals import ConfirmScreen, DecisionEditor, IssuePrompt
from tui_client.sessions_wire import ListedSession, Session
from tui_client.sse import SseError
from tui_client.transcript import AssistantMessage, Notice, UserMessage, response_from_message

__all__ = ["ChatPanel", "Composer", "SessionItem", "SessionList", "describe", "while_mounted"]
log = logging.getLogger(__name__)
P = ParamSpec("P")
W = TypeVar("W", bound=Widget)
TRANSPORT_ERRORS = (ApiError, ServiceUnreachable, SseError)
T = TypeVar("T")


class Unanswered(enum.Enum):
    """A request that failed; the failure is already on the screen."""

    UNANSWERED = enum.auto()


UNANSWERED: Final = Unanswered.UNANSWERED
STOPPED_TEXT = "Stopped. Nothing of this turn was saved; the next message starts fresh."


def describe(exc: Exception) -> str:
    """An error as the operator should read it: what happened and what to do."""
    if isinstance(exc, ServiceUnreachable):
        return f"{exc}. Is `steelframe serve` or `steelframe dev` running? Check --url."
    if isinstance(exc, ApiError) and exc.unauthorized:
        return f"The service refused the operator token ({exc.message}). Check --token."
    if isinstance(exc, ApiError):
        return f"{exc.message} ({exc.status} {exc.code})"
    return f"The service sent something unreadable: {exc}"


def while_mounted(
    fn: Callable[Concatenate[W, P], Awaitable[None]],
) -> Callable[Concatenate[W, P], Awaitable[None]]:
    """For workers: when the app shuts down under a request in flight, the widgets it would
    update are already gone; that is the end of the work, not an error."""

    @functools.wraps(fn)
    async def run(widget: W, /, *args: P.args, **kwargs: P.kwargs) -> None:
        try:
            await fn(widget, *args, **kwargs)
        except (NoMatches, MountError):
            if widget.app.is_running and widget.is_attached:
                raise

    return run


def offline_reason(exc: Exception) -> str | None:
    if isinstance(exc, ServiceUnreachable):
        return "service unreachable"
    if isinstance(exc, ApiError) and exc.unauthorized:
        return "token refused"
    return None


class ChatPanel(Widget):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+n", "new_chat", "New chat"),
        Binding("escape", "stop", "Stop"),
        # `f` where no text is typed (session list, transcript); ctrl+f from the composer,
        # where `f` must stay a letter ("fix the build").
        Binding("ctrl+f", "focus_issue", "Focus #N"),
        Binding("f", "focus_issue", "Focus #N", show=False),
        Binding("ctrl+t", "toggle_row('thinking')", "Thinking"),
        Binding("ctrl+g", "toggle_row('hits')", "Hits"),
    ]

    def __init__(self, client: OperatorClient, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client
        self.state = ChatState()
        self._keys_shown: tuple[bool, ...] = ()
        self.unseen: set[str] = set()  # sessions a task result reached while not open
        self._stale = False  # the open transcript changed during a turn: reload after it
        self._draft_at_switch = ""  # the composer's text when a new chat was asked for

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="sidebar"):
                yield Label("Chats", classes="pane-title")
                yield SessionList(id="sessions")
            with Vertical(id="conversation"):
                yield Static("New chat", id="chat-header", markup=False)
                yield VerticalScroll(id="transcript")
                yield Static("", id="status-line", markup=False)
                yield Composer(
                    self.state, placeholder="Message Steelframe (Enter sends)", id="composer"
                )

    def on_mount(self) -> None:
        self.query_one("#transcript", VerticalScroll).anchor()
        self.refresh_status()
        self.load_sessions(open_active=True)

    # -- parts ---------------------------------------------------------------------------

    @property
    def composer(self) -> Composer:
        return self.query_one(Composer)

    @property
    def transcript(self) -> VerticalScroll:
        return self.query_one("#transcript", VerticalScroll)

    @property
    def sessions(self) -> SessionList:
        return self.query_one(SessionList)

    def status_text(self) -> str:
        return status_line(self.state, composer_empty=self.composer.value == "")

    def refresh_status(self) -> None:
        composer_empty = self.composer.value == ""
        self.query_one("#status-line", Static).update(
            status_line(self.state, composer_empty=composer_empty)
        )
        header = self.state.title or "New chat"
        if self.state.focus is not None:
            header += f" · focused on #{self.state.focus}"
        self.query_one("#chat-header", Static).update(header)
        # The footer rebuilds itself on every refresh: only when a key's availability changed.
        keys = (self.state.busy, self.state.has_decision, self.state.can_file, composer_empty)
        if keys != self._keys_shown:
            self._keys_shown = keys
            self.app.refresh_bindings()

    async def notice(self, text: str, *, kind: str = "info") -> None:
        await self.transcript.mount(Notice(text, kind=kind))

    async def _ask(self, request: Awaitable[T]) -> T | Unanswered:
        """The service's answer, or UNANSWERED once its failure is shown to the operator."""
        try:
            return await request
        except TRANSPORT_ERRORS as exc:
            await self.report(exc)
            return UNANSWERED

    async def report(self, exc: Exception) -> None:
        """Show a failed request in the transcript; mark the service offline if it is."""
        reason = offline_reason(exc)
        if reason is not None:
            self.state.offline = reason
        await self.notice(describe(exc), kind="error")
        self.refresh_status()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop":
            return self.state.busy
        return True

    def action_toggle_row(self, part: str) -> None:
        """Open or close the last reply's Thinking or retrieve-hits row (no shift+tab hunt)."""
        for message in reversed(list(self.transcript.query(AssistantMessage))):
            row = message.thinking if part == "thinking" else message.hits
            if row is not None and row.display:
                row.collapsed = not row.collapsed
                return

    # -- live updates (the operator events stream, see SteelframeApp.watch_events) -------

    def result_arrived(self, session_id: str) -> None:
        """A task result was appended to `session_id`: show it if open, else mark it."""
        if session_id and session_id == self.state.session_id:
            self.refresh_transcript()
            self.note_seen(session_id)
        elif session_id:
            self.unseen.add(session_id)
            self.load_sessions()

    @work(group="seen")
    @while_mounted
    async def note_seen(self, session_id: str) -> None:
        """Shown in the open session: seen, so no dot comes back with the next list. Best
        effort: a failure here only leaves the dot for the next open to clear."""
        try:
            await self.client.mark_seen(session_id)
        except TRANSPORT_ERRORS:
            log.debug("could not mark session %s seen", session_id)

    def session_changed(self, session_id: str, change: str) -> None:
        self.load_sessions()
        if change == "deleted" and session_id == self.state.session_id and not self.state.busy:
            self.state.reset()
            self.call_later(self.transcript.remove_children)
            self.refresh_status()

    @work(exclusive=True, group="refresh-transcript")
    @while_mounted
    async def refresh_transcript(self) -> None:
        """Re-read the open session (GET: reading pins nothing) and show it again; during a
        turn, after it (the turn's own reply must not be replaced mid-stream)."""
        session_id = self.state.session_id
        if session_id is None:
            return
        if self.state.busy:
            self._stale = True
            return
        session = await self._ask(self.client.session(session_id))
        if session is UNANSWERED:
            return
        # Rendered by the panel's message loop (see load_sessions: no cancelled mounts).
        self.call_later(self._show_refreshed, session)

    async def _show_refreshed(self, session: Session) -> None:
        if self.state.session_id != session.id or self.state.busy:
            return
        kept = self.state.focus_change, self.state.focus
        self.state.open_session(session)
        if kept[0] is not KEEP:  # a focus the operator set stays set
            self.state.focus_change, self.state.focus = kept
        await self._render_session(session)
        self.refresh_status()

    # -- sessions ------------------------------------------------------------------------

    @work(exclusive=True, group="sessions")
    @while_mounted
    async def load_sessions(self, *, open_active: bool = False) -> None:
        sessions = await self._ask(self.client.sessions())
        if sessions is UNANSWERED:
            return
        self.state.offline = None
        # Rendered by the panel's own message loop, not by this worker: a newer load (live
        # updates ask often) cancels this worker, and a list cancelled mid-mount never settles.
        self.call_later(self._show_sessions, sessions)
        if open_active and self.state.session_id is None:
            active = next((s for s in sessions if s.active), None)
            if active is not None:
                self.open_session(active.id)
                return
        self.refresh_status()

    async def _show_sessions(self, sessions: list[ListedSession]) -> None:
        # The state first: the status line follows the service's answer, not the widgets.
        for session in sessions:
            if session.id == self.state.session_id:
                self.state.title = session.title
                self.state.focus = session.focus
        self.refresh_status()
        await self.sessions.show(sessions, unseen=self._unseen, current=self.state.session_id)

    def _unseen(self, session: ListedSession) -> bool:
        """A result arrived since the operator last looked: noted here, or by the service
        (kept across restarts of the TUI); never for the session on screen."""
        sid = session.id
        noted = sid in self.unseen or session.unseen
        return noted and sid != self.state.session_id

    @on(ListView.Selected, "#sessions")
    def _session_selected(self, event: ListView.Selected) -> None:
        if isinstance(event.item, SessionItem):
            self.open_session(event.item.session_id)

    def open_session(self, session_id: str) -> None:
        """Reopen a session: its transcript, Decision draft and proposal; the service pins
        the next message to it."""
        if self._begin_switch():
            self._open_session(session_id)

    @work(exclusive=True, group="open")
    @while_mounted
    async def _open_session(self, session_id: str) -> None:
        session = await self._switch_answer(self.client.open_session(session_id))
        if session is UNANSWERED:
            return
        self.state.open_session(session)
        await self._render_session(session)
        self._switch_done()
        # Opening it marked its results seen on the service: a dot shown for it (noted here
        # or by the service's list) goes with a fresh list, not with the next live update.
        dotted = any(
            item.unseen and item.session_id == session_id
            for item in self.sessions.query(SessionItem)
        )
        if dotted or session_id in self.unseen:
            self.unseen.discard(session_id)
            self.load_sessions()

    async def _render_session(self, session: Session) -> None:
        transcript = self.transcript
        await transcript.remove_children()
        widgets: list[Widget] = []
        messages = session.messages
        last_assistant = max(
            (i for i, m in enumerate(messages) if m.role == "assistant"), default=-1
        )
        for message in messages:
            if message.role == "user":
                widgets.append(UserMessage(message.content))
            else:
                widgets.append(AssistantMessage(reasoning=message.reasoning or "", streaming=False))
        await transcript.mount_all(widgets)
        for index, (message, widget) in enumerate(zip(messages, widgets, strict=True)):
            if isinstance(widget, AssistantMessage):
                decision = self._decision() if index == last_assistant else None
                await widget.finish(response_from_message(message), decision=decision)
        transcript.scroll_end(animate=False)

    def _decision(self) -> tuple[str, int] | None:
        if self.state.decision_body and self.state.decision_issue:
            return self.state.decision_body, self.state.decision_issue
        return None

    async def _refuse_while_busy(self) -> bool:
        if self.state.busy:
            await self.notice("A turn is in flight: press esc to stop it first.", kind="error")
        return self.state.busy

    # -- switching chats -----------------------------------------------------------------
    # Until the service answers a new chat or a reopen, the session the next message goes
    # to is unknown (the service still pins the old one). The composer stays usable, but a
    # message sent meanwhile is held and sent once the chat is open: typed right after
    # ctrl+n, it is meant for the new chat, never for the one still on screen.

    def _begin_switch(self) -> bool:
        """Called synchronously by the key or click, before the worker starts: an Enter
        pressed right after ctrl+n is already held. False: refused, a turn is in flight
        (the switch would leave its reply streaming into a transcript no longer shown)."""
        if self.state.busy:
            self.call_later(self._refuse_while_busy)
            return False
        self.state.switching = True
        self._draft_at_switch = self.composer.value
        self.refresh_status()
        return True

    async def _switch_answer(self, request: Awaitable[T]) -> T | Unanswered:
        """The opened session, or UNANSWERED with the error shown and a held message back
        in the composer (never sent to the old session: the operator sends it again)."""
        session = await self._ask(request)
        if session is UNANSWERED:
            state, composer = self.state, self.composer
            state.switching = False
            held, state.held = state.held, None
            if held is not None:
                composer.value = f"{held} {composer.value}".rstrip()
                composer.cursor_position = len(composer.value)
                await self.notice(
                    "Not sent: the chat did not open. Your message is back in the composer.",
                    kind="error",
                )
            self.refresh_status()
            return UNANSWERED
        self.state.offline = None
        return session

    def _switch_done(self) -> None:
        """The chat is open and shown: a message held meanwhile is its first."""
        state = self.state
        state.switching = False
        held, state.held = state.held, None
        if held is not None:
            self._start_turn(held)
        self.refresh_status()

    def action_new_chat(self) -> None:
        self.new_chat()

    def new_chat(self, issue: int | None = None) -> None:
        """A fresh session; with an issue, a Discuss session focused on it. Nothing is sent."""
        if self._begin_switch():
            self._new_chat(issue)

    @work(exclusive=True, group="open")
    @while_mounted
    async def _new_chat(self, issue: int | None) -> None:
        title = f"Discuss #{issue}" if issue is not None else None
        session = await self._switch_answer(self.client.new_session(title=title, issue=issue))
        if session is UNANSWERED:
            return
        self.state.open_session(session)
        await self.transcript.remove_children()
        composer = self.composer
        # A draft meant for the old chat goes; text typed since ctrl+n is for this one.
        if composer.value == self._draft_at_switch:
            composer.value = ""
        composer.focus()
        self._switch_done()
        self.load_sessions()

    def start_discuss(self, issue: int) -> None:
        self.new_chat(issue)

    @on(SessionList.DiscussRequested)
    def _discuss_requested(self) -> None:
        def chosen(issue: int | None) -> None:
            if issue is not None:
                self.start_discuss(issue)

        self.app.push_screen(IssuePrompt(), chosen)

    @on(SessionList.DeleteRequested)
    def _delete_requested(self, event: SessionList.DeleteRequested) -> None:
        session_id = event.session_id

        def answered(yes: bool | None) -> None:
            if yes:
                self.delete_session(session_id)

        self.app.push_screen(
            ConfirmScreen(f'Delete the chat "{event.title}" and all its messages?'), answered
        )

    @work(group="delete")
    @while_mounted
    async def delete_session(self, session_id: str) -> None:
        if await self._ask(self.client.delete_session(session_id)) is UNANSWERED:
            return
        if self.state.session_id == session_id:
            self.state.reset()
            await self.transcript.remove_children()
        self.refresh_status()
        self.load_sessions()

    # -- turns ---------------------------------------------------------------------------

    @on(Input.Changed, "#composer")
    def _composer_changed(self) -> None:
        self.refresh_status()

    @on(Input.Submitted, "#composer")
    async def _composer_submitted(self, event: Input.Submitted) -> None:
        text = event.value
        if not text.strip():
            return
        if await self._refuse_while_busy():
            return
        if self.state.switching:
            if self.state.held is None:  # one message waits; a second stays in the composer
                self.state.held = text
                self.composer.value = ""
            self.refresh_status()
            return
        self.composer.value = ""
        self._start_turn(text)

    def _start_turn(self, text: str) -> None:
        """Busy from the key press on, not from when the worker starts: a ctrl+n or a
        second Enter right after it is refused, not raced against the turn."""
        self.state.busy, self.state.phase = True, "sending"
        self.refresh_status()
        self.send(text)

    @work(exclusive=True, group="turn")
    @while_mounted
    async def send(self, text: str) -> None:
        state = self.state
        state.busy, state.phase = True, "sending"
        self.refresh_status()
        reply = AssistantMessage()
        await self.transcript.mount_all([UserMessage(text), reply])
        focus, state.focus_change = state.focus_change, KEEP
        try:
            async for frame in self.client.turn(text, session_id=state.session_id, focus=focus):
                await self._apply_frame(frame, reply)
        except TRANSPORT_ERRORS as exc:
            await reply.fail(describe(exc))
            if (reason := offline_reason(exc)) is not None:
                state.offline = reason
        except (NoMatches, MountError):
            raise  # the panel is gone (see while_mounted)
        except Exception as exc:  # the app keeps running whatever a turn does
            log.exception("turn failed in the client")
            await reply.fail(f"Unexpected error: {type(exc).__name__}: {exc}")
        finally:
            state.busy, state.phase = False, ""
            self.refresh_status()
            if self._stale:
                self._stale = False
                self.refresh_transcript()

    async def _apply_frame(self, frame: dict[str, Any], reply: AssistantMessage) -> None:
        kind = frame.get("type")
        state = self.state
        if kind == wire.STATUS:
            state.phase = str(frame.get("text") or state.phase)
            if frame.get("session"):
                state.session_id = str(frame["session"])
        elif kind == wire.THINKING:
            state.phase = "thinking"
            await reply.add_thinking(str(frame.get("text") or ""))
        elif kind == wire.DELTA:
            state.phase = "grounded re-draft" if frame.get("draft", 1) > 1 else "replying"
            await reply.add_delta(str(frame.get("text") or ""), replace=bool(frame.get("replace")))
        elif kind == wire.DONE:
            response = frame.get("response") or {}
            state.offline = None
            state.finish_turn(response)
            await reply.finish(response, decision=self._decision())
            self.load_sessions()  # a first message titles the session
        elif kind == wire.ERROR:
            stopped = frame.get("reason") == "stopped"
            await reply.fail(
                STOPPED_TEXT if stopped else f"Turn failed: {frame.get('error')}",
                kind="stopped" if stopped else "error",
            )
        self.refresh_status()

    def action_stop(self) -> None:
        if self.state.busy:
            self.state.phase = "stopping"
            self.refresh_status()
            self.stop_turn()

    @work(group="stop")
    @while_mounted
    async def stop_turn(self) -> None:
        try:
            result = await self.client.stop()
        except TRANSPORT_ERRORS as exc:
            # The service cannot be told; at least stop listening here.
            self.workers.cancel_group(self, "turn")
            await self.report(exc)
            return
        if not result.get("stopped"):
            log.info("stop: no turn in flight on the service")

    # -- decisions and filing ------------------------------------------------------------

    @on(Composer.Publish)
    def _publish(self) -> None:
        self.publish_decision()

    @on(Composer.File)
    def _file(self) -> None:
        self.file_pending()

    @on(Composer.EditDecision)
    def _edit_decision(self) -> None:
        state = self.state
        if not (state.decision_body and state.decision_issue):
            return

        def edited(text: str | None) -> None:
            if text is not None and text.strip():
                state.decision_body = text.strip()
                self.refresh_status()
                self.call_later(
                    self.notice,
                    f"Decision draft for #{state.decision_issue} edited: P publishes it",
                )

        self.app.push_screen(DecisionEditor(state.decision_issue, state.decision_body), edited)

    def action_focus_issue(self) -> None:
        """Set the focus (an issue number) or clear it (empty), for the next message."""
        if self.state.busy:
            return

        def chosen(issue: int | None) -> None:
            if issue is None:
                return  # cancelled
            # 0 is the prompt's "empty": clear the focus. Sent with the next message.
            self.state.focus_change = issue or None
            self.state.focus = issue or None
            self.refresh_status()

        current = self.state.focus
        question = "Focus on which issue? (empty clears the focus)"
        if current is not None:
            question = f"Focused on #{current}. Focus on which issue? (empty clears it)"
        self.app.push_screen(IssuePrompt(question, allow_empty=True), chosen)

    @work(exclusive=True, group="publish")
    @while_mounted
    async def publish_decision(self) -> None:
        state = self.state
        if not (state.decision_body and state.decision_issue):
            return
        issue = state.decision_issue
        request_id = uuid.uuid4().hex  # one press, one Decision (a retry posts nothing more)
        result = await self._ask(
            self.client.publish_decision(
                issue=issue,
                body=state.decision_body,
                session_id=state.session_id,
                request_id=request_id,
            )
        )
        if result is UNANSWERED:
            return
        state.clear_decision()
        url = result.get("comment_url") or ""
        await self.notice(
            f"Published the Decision to #{result.get('issue', issue)} {url}".rstrip(),
            kind="published",
        )
        self.refresh_status()

    @work(exclusive=True, group="publish")
    @while_mounted
    async def file_pending(self) -> None:
        state = self.state
        if not state.can_file:
            return
        title = state.pending_title
        result = await self._ask(self.client.file_pending(session_id=state.session_id))
        if result is UNANSWERED:
            return
        state.pending_title = None
        started = " · task started" if result.get("filed_task_started") else ""
        number = result.get("filed_issue_number")
        url = result.get("filed_issue_url") or ""
        await self.notice(
            f'Filed #{number} "{title}" {url}{started}'.replace("  ", " "), kind="filed"
        )
        self.refresh_status()
