"""The Chat panel: session list, transcript, status line and composer (spec: Chat).

The widget Textual dispatches to: its layout, keys and messages, and the status line. Each
concern is a part of its own, run on the panel: switching chats (`chat_switch.py`), the
turn and its stream (`chat_turn.py`), the session list and live updates
(`chat_sessions.py`), Decision drafts, filing and focus (`chat_drafts.py`). All data comes
from `OperatorClient`; every failure lands in the transcript as a notice, so the app keeps
running whatever the service does.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, ClassVar, TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Input, Label, ListView, Static

from tui_client.api import OperatorClient
from tui_client.chat_drafts import Drafts
from tui_client.chat_sessions import SessionListing
from tui_client.chat_state import ChatState, header_line, status_line
from tui_client.chat_switch import ChatSwitch
from tui_client.chat_turn import TurnStream
from tui_client.chat_widgets import Composer, SessionItem, SessionList, as_sent
from tui_client.failures import TRANSPORT_ERRORS, UNANSWERED, Unanswered, describe, offline_reason
from tui_client.modals import ConfirmScreen, IssuePrompt
from tui_client.transcript import AssistantMessage, Notice

__all__ = ["ChatPanel", "Composer", "SessionItem", "SessionList"]
T = TypeVar("T")


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
        # A reply longer than the transcript (15 lines at 80x24) is read without leaving
        # the composer (the transcript's own keys, and the list's, win where they focus).
        Binding("pageup", "scroll_transcript(-1)", "Scroll up", show=False),
        Binding("pagedown", "scroll_transcript(1)", "Scroll down", show=False),
    ]

    def __init__(self, client: OperatorClient, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client
        self.state = ChatState()
        self._keys_shown: tuple[bool, ...] = ()
        self.switch = ChatSwitch(self)
        self.turn = TurnStream(self)
        self.listing = SessionListing(self)
        self.drafts = Drafts(self)

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="sidebar"):
                yield Label("Chats", classes="pane-title")
                # Where the chats would be, when they could not load (not an empty list).
                yield Static("", id="sessions-error", markup=False)
                yield SessionList(id="sessions")
            with Vertical(id="conversation"):
                yield Static("New chat", id="chat-header", markup=False)
                yield VerticalScroll(id="transcript")
                yield Static("", id="status-line", markup=False)
                yield Composer(
                    self.state, placeholder="Message Steelframe (Enter sends)", id="composer"
                )

    def on_mount(self) -> None:
        self.transcript.anchor()
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
        line = self.query_one("#status-line", Static)
        width = line.content_region.width or None  # (none yet: before the first layout)
        self._show(
            "#status-line", status_line(self.state, composer_empty=composer_empty, width=width)
        )
        header = self.query_one("#chat-header", Static)
        self._show(
            "#chat-header", header_line(self.state, width=header.content_region.width or None)
        )
        # The footer's keys are worked out again on every refresh: only when a key's
        # availability changed.
        keys = (self.state.busy, self.state.has_decision, self.state.can_file, composer_empty)
        if keys != self._keys_shown:
            self._keys_shown = keys
            self.app.refresh_bindings()

    def on_resize(self) -> None:
        # The status line's and the header's titles are cut to their width: the lines' new
        # widths are known once the new layout is done.
        self.call_after_refresh(self.refresh_status)

    def _show(self, selector: str, text: str) -> None:
        """A line's text, updated only when it changed: every frame of a turn refreshes the
        status, and an update lays the whole screen out again even when it says the same."""
        line = self.query_one(selector, Static)
        if line.content != text:
            line.update(text)

    async def notice(self, text: str, *, kind: str = "info") -> None:
        await self.transcript.mount(Notice(text, kind=kind))

    async def ask(self, request: Awaitable[T]) -> T | Unanswered:
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
        text = describe(exc)
        # Said once while it lasts: the lists reloaded every 10 s once live updates stopped
        # (with a wrong token, each one refused) added the same line each time, scrolling
        # the conversation away under it. A change of failure, or anything shown in
        # between, is said again.
        last = self.transcript.children[-1:]
        if not (last and isinstance(last[0], Notice) and last[0].text == text):
            await self.notice(text, kind="error")
        self.refresh_status()

    async def refuse_while_busy(self) -> bool:
        if self.state.busy:
            await self.notice("A turn is in flight: press esc to stop it first.", kind="error")
        return self.state.busy

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop":
            return self.state.busy
        return True

    def action_scroll_transcript(self, pages: int) -> None:
        if pages < 0:
            self.transcript.scroll_page_up()
        else:
            self.transcript.scroll_page_down()

    def action_toggle_row(self, part: str) -> None:
        """Open or close the last reply's Thinking or retrieve-hits row (no shift+tab hunt)."""
        for message in reversed(list(self.transcript.query(AssistantMessage))):
            row = message.thinking if part == "thinking" else message.hits
            if row is not None and row.display:
                row.collapsed = not row.collapsed
                return

    # -- what the app asks of the panel (keys, the events stream, the Board) -------------

    def load_sessions(self, *, open_active: bool = False) -> None:
        self.listing.load(open_active=open_active)

    def refresh_transcript(self) -> None:
        self.listing.refresh_transcript()

    def result_arrived(self, session_id: str) -> None:
        self.listing.result_arrived(session_id)

    def session_changed(self, session_id: str, change: str) -> None:
        self.listing.session_changed(session_id, change)

    def open_session(self, session_id: str) -> None:
        self.switch.open_session(session_id)

    def new_chat(self, issue: int | None = None) -> None:
        self.switch.new_chat(issue)

    def start_discuss(self, issue: int) -> None:
        self.switch.new_chat(issue)

    # -- keys and messages ---------------------------------------------------------------

    def action_new_chat(self) -> None:
        self.switch.new_chat()

    def action_stop(self) -> None:
        self.turn.stop()

    def action_focus_issue(self) -> None:
        self.drafts.choose_focus()

    @on(Input.Changed, "#composer")
    def _composer_changed(self) -> None:
        self.refresh_status()

    @on(Input.Submitted, "#composer")
    async def _composer_submitted(self, event: Input.Submitted) -> None:
        await self.turn.submit(as_sent(event.value))

    @on(ListView.Selected, "#sessions")
    def _session_selected(self, event: ListView.Selected) -> None:
        if isinstance(event.item, SessionItem):
            self.switch.open_session(event.item.session_id)
            # What is typed next is the next message to that chat (held until it is open),
            # not the list's keys: `d` would ask to delete it, and a `y` answer yes.
            self.composer.focus()

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
                self.listing.delete(session_id)

        self.app.push_screen(
            ConfirmScreen(f'Delete the chat "{event.title}" and all its messages?'), answered
        )

    @on(Composer.Publish)
    def _publish(self) -> None:
        self.drafts.publish()

    @on(Composer.File)
    def _file(self) -> None:
        self.drafts.file()

    @on(Composer.EditDecision)
    def _edit_decision(self) -> None:
        self.drafts.edit_decision()
