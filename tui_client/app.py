"""The Steelframe TUI application: Chat and Board tabs over one operator API client."""

from __future__ import annotations

import contextlib
from typing import ClassVar

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.widgets import Header, TabbedContent, TabPane
from textual.worker import WorkerCancelled, WorkerFailed

from tui_client.api import ApiError, LiveStatus, OperatorClient
from tui_client.board import BoardPanel
from tui_client.chat import ChatPanel
from tui_client.events_wire import (
    EventFrame,
    FixRunFrame,
    LedgerFrame,
    ResultFrame,
    ResyncFrame,
    ReviewFrame,
    SessionFrame,
    TaskFrame,
)
from tui_client.failures import describe
from tui_client.keys_footer import KeysFooter, KeysScreen, key_lines
from tui_client.live import news_notice, task_notice

# Once live updates have stopped for good (the stream refused with a 404, a 401: not asked
# again), the Board and the session list are reloaded this often, so what they show is never
# more than this far behind without a ctrl+r. The web GUI polls every 4 s (its POLL_MS in
# web_gui/static/events.js, where polling also drives its news); the TUI only keeps its two
# lists current, and a terminal left open all day costs the service two GETs per period:
# 10 s is behind by less than a glance at another window, at well under half the load.
# (The app takes another period as `stopped_refresh_seconds`: the tests shorten it.)
STOPPED_REFRESH_SECONDS = 10.0


class SteelframeApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "Steelframe"
    BINDINGS: ClassVar[list[BindingType]] = [
        # Every key the screen offers, for a footer too narrow to show them all (80
        # columns); `?` where no text is typed, f3 anywhere (the composer types a `?`).
        Binding("f3,question_mark", "show_keys", "Keys"),
        Binding("f1", "show_tab('chat')", "Chat"),
        Binding("f2", "show_tab('board')", "Board"),
        Binding("ctrl+r", "refresh", "Refresh"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(
        self, client: OperatorClient, *, stopped_refresh_seconds: float = STOPPED_REFRESH_SECONDS
    ) -> None:
        super().__init__()
        self.client = client
        self.stopped_refresh_seconds = stopped_refresh_seconds
        self.sub_title = client.base_url
        self.told: list[str] = []
        self._stream_opened = False  # the events stream has been open at least once
        self._stream_live = False  # it is open now
        self.stopped_refresh: Timer | None = None  # reloads the lists once live updates stop

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="chat"):
            with TabPane("Chat", id="chat"):
                yield ChatPanel(self.client, id="chat-panel")
            with TabPane("Board", id="board"):
                yield BoardPanel(self.client, id="board-panel")
        yield KeysFooter()

    @property
    def chat(self) -> ChatPanel:
        return self.query_one(ChatPanel)

    @property
    def board(self) -> BoardPanel:
        return self.query_one(BoardPanel)

    def on_mount(self) -> None:
        self.chat.composer.focus()
        self.watch_events()

    # -- the operator events stream ------------------------------------------------------

    def tell(self, text: str, *, severity: SeverityLevel = "information") -> None:
        """A notification (kept in `told`, newest last, so the operator can be shown it)."""
        self.told.append(text)
        self.notify(text, severity=severity, timeout=8)

    @work(exclusive=True, group="events")
    async def watch_events(self) -> None:
        """Task changes, results and session changes, live: the Board, the session list and
        an open transcript follow them (the client re-opens a broken stream by itself, and
        the header says so meanwhile: `live updates: reconnecting…`)."""
        try:
            async for frame in self.client.events(on_status=self._stream_status):
                self.apply_event(frame)
        except ApiError as exc:
            self.show_live_status(LiveStatus(live=False, reason=describe(exc)))
            self.tell(f"Live updates stopped: {describe(exc)}", severity="error")
            self._refresh_while_stopped()

    def _refresh_while_stopped(self) -> None:
        """The stream is not asked again: the lists are reloaded on a timer instead (the
        open transcript is not: the operator's own turns keep it current)."""
        if self.stopped_refresh is None:
            self.stopped_refresh = self.set_interval(
                self.stopped_refresh_seconds, self._reload_lists, name="stopped-refresh"
            )

    def _reload_lists(self) -> None:
        """A tick reloads each list unless its load is still running: asked meanwhile, a
        list would be loaded once more as soon as it came (`CoalescedLoad`), so one slower
        to answer than the period would be asked for back to back. Skipped, the running load
        shows what it gets, and the next tick asks again."""
        try:
            board, chat = self.board, self.chat
        except NoMatches:  # the app is closing: its screen goes before its timers stop
            return
        if not board.loads.running:
            board.load()
        if not chat.listing.lists.running:
            chat.load_sessions()

    def _stream_status(self, status: LiveStatus) -> None:
        reopened = status.live and self._stream_opened and not self._stream_live
        self._stream_live = status.live
        try:
            if status.live and not self._stream_opened:
                # The start-up loads ran before the stream opened, and a stream opened
                # without a position starts "now": what changed in between would show only
                # with its next change. Loaded again once it is open, nothing falls in that gap.
                self._stream_opened = True
                self.reload_lists()
            elif reopened:
                # Back after a break (the network, a restart of the service): the stream
                # replays the events missed, but a reply lost with the connection is no
                # event. The open chat is read again, as the web GUI reopens it.
                self.chat.refresh_transcript()
        except NoMatches:
            return  # the app is closing (its panels are gone): nothing left to load
        self.show_live_status(status)

    def show_live_status(self, status: LiveStatus) -> None:
        """The header's second line: the service's address, and while the events stream is
        down why and that it is being re-opened (what the Board shows may be behind)."""
        base = self.client.base_url
        if status.live:
            self.sub_title = base
        elif status.retry_in:
            self.sub_title = f"{base} · live updates: reconnecting… ({status.reason})"
        else:
            every = f"refreshing every {self.stopped_refresh_seconds:g} s"
            self.sub_title = f"{base} · live updates stopped · {every}"

    def apply_event(self, frame: EventFrame) -> None:
        if isinstance(frame, TaskFrame):
            self.board.task_changed(frame)
            notice = task_notice(frame)
            if notice is not None and not self._shows_result(frame.result_session):
                self.tell(notice[0], severity=notice[1])
        elif isinstance(frame, LedgerFrame):  # a review thread on a task's pull request changed
            self.board.task_changed(frame)
        elif isinstance(frame, ReviewFrame | FixRunFrame):  # a review run or CI fix run starts
            self.board.task_changed(frame)
            known = self.board.tasks.get(str(frame.task_id))
            self.tell(news_notice(frame, known.issue if known else None))
        elif isinstance(frame, ResultFrame):
            self.chat.result_arrived(frame.session_id)
        elif isinstance(frame, SessionFrame):
            self.chat.session_changed(frame.session_id, frame.change)
        elif isinstance(frame, ResyncFrame):
            self.board.load()
            self.chat.load_sessions()
            self.chat.refresh_transcript()

    def _shows_result(self, session_id: str | None) -> bool:
        """Whether the change's result is about to appear in the transcript in front of the
        operator (the Chat tab, that session open): the result says it, so a notification
        would tell the same news twice. The event names the session only when a result
        follows (docs/api.md, "Events"), as the web GUI reads it."""
        return (
            session_id is not None
            and self.query_one(TabbedContent).active == "chat"
            and self.chat.state.session_id == session_id
        )

    async def on_unmount(self) -> None:
        if self.stopped_refresh is not None:
            self.stopped_refresh.stop()
            self.stopped_refresh = None
        # The events worker reads through the client: stopped first, it ends cancelled
        # rather than failing on a connection closed between two of its reads.
        for worker in self.workers.cancel_group(self, "events"):
            with contextlib.suppress(WorkerCancelled, WorkerFailed):
                await worker.wait()
        await self.client.close()

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        if tab == "chat":
            self.chat.composer.focus()
        else:
            self.board.table.focus()

    def action_show_keys(self) -> None:
        """The keys help of the screen shown (its own f3 or `?` closes it: a modal screen
        keeps the app's keys from its keys)."""
        if not isinstance(self.screen, KeysScreen):
            self.push_screen(KeysScreen(key_lines(self.screen)))

    def action_refresh(self) -> None:
        """ctrl+r: the lists, and the open chat read again (a reply lost with the
        connection, a message another client sent in it)."""
        self.reload_lists()
        self.chat.refresh_transcript()

    def reload_lists(self) -> None:
        self.chat.load_sessions(open_active=True)
        self.board.load()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "board":
            self.board.load()

    @on(BoardPanel.Discuss)
    def _discuss(self, event: BoardPanel.Discuss) -> None:
        self.query_one(TabbedContent).active = "chat"
        self.chat.start_discuss(event.issue)
