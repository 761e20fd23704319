"""The session list and what the live updates do to it: loading and showing the list, the
unseen dots, deleting a chat, and re-reading the open transcript when a result reaches it."""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from textual.widgets import Static
from textual.worker import WorkerCancelled, WorkerFailed

from tui_client.api import KEEP
from tui_client.chat_part import ChatPart
from tui_client.chat_widgets import SessionItem
from tui_client.coalesced import CoalescedLoad
from tui_client.failures import TRANSPORT_ERRORS, UNANSWERED, in_short
from tui_client.sessions_wire import ListedSession, Session

if TYPE_CHECKING:
    from tui_client.chat import ChatPanel

log = logging.getLogger(__name__)


class SessionListing(ChatPart):
    def __init__(self, panel: ChatPanel) -> None:
        super().__init__(panel)
        self.unseen: set[str] = set()  # sessions a task result reached while not open
        self._stale = False  # the open transcript changed during a turn: reload after it
        # Loads that must show the newest state: an ask while one runs loads once more after
        # it, never cancels it (asked often: keys, the events stream, the timer, a turn's end).
        self.lists = CoalescedLoad(panel, "sessions", self._load)
        self.transcripts = CoalescedLoad(panel, "refresh-transcript", self._refresh_transcript)
        self._open_active = False  # a load asked to open the service's active chat

    # -- the list ------------------------------------------------------------------------

    def load(self, *, open_active: bool = False) -> None:
        """Reload the list; `open_active`: and with no chat open, open the one the service
        has active. Asked while a load runs, the list is loaded once more after it, and
        opens the active chat then if any ask meanwhile said so."""
        self._open_active = self._open_active or open_active
        self.lists.ask()

    async def _load(self) -> None:
        open_active, self._open_active = self._open_active, False
        try:
            sessions = await self.client.sessions()
        except TRANSPORT_ERRORS as exc:
            await self.panel.report(exc)
            self._say_failed(f"Chats could not load ({in_short(exc)}). ctrl+r tries again.")
            return
        self._say_failed(None)
        self.state.offline = None
        # Rendered by the panel's own message loop, not by this worker: the list is shown
        # whole whatever becomes of the worker (one cancelled mid-mount, as when loads were
        # exclusive, left a list that never settled). The shows keep the loads' order.
        self.panel.call_later(self._show, sessions)
        # (Not while a chat is being opened: that one is what the operator asked for, and a
        # message may be waiting for it.)
        if open_active and self.state.session_id is None and not self.state.switching:
            active = next((s for s in sessions if s.active), None)
            if active is not None:
                self.panel.switch.open_session(active.id)
                return
        self.panel.refresh_status()

    def _say_failed(self, text: str | None) -> None:
        """The list's failure, where the chats would be; None: it loaded."""
        note = self.panel.query_one("#sessions-error", Static)
        note.display = text is not None
        if text is not None:
            note.update(text)

    async def _show(self, sessions: list[ListedSession]) -> None:
        # The state first: the status line follows the service's answer, not the widgets.
        for session in sessions:
            if session.id == self.state.session_id:
                # Its subject, as the list shows it ("Flaky login test", not the request).
                self.state.title = session.label or session.title
                self.state.focus = session.focus
        self.panel.refresh_status()
        await self.sessions.show(sessions, unseen=self._unseen, current=self.state.session_id)

    def _unseen(self, session: ListedSession) -> bool:
        """A result arrived since the operator last looked: noted here, or by the service
        (kept across restarts of the TUI); never for the session on screen."""
        sid = session.id
        noted = sid in self.unseen or session.unseen
        return noted and sid != self.state.session_id

    def opened(self, session_id: str) -> None:
        """Opening it marked its results seen on the service: a dot shown for it (noted here
        or by the service's list) goes with a fresh list, not with the next live update."""
        dotted = any(
            item.unseen and item.session_id == session_id
            for item in self.sessions.query(SessionItem)
        )
        if dotted or session_id in self.unseen:
            self.unseen.discard(session_id)
            self.load()

    # -- deleting ------------------------------------------------------------------------

    def delete(self, session_id: str) -> None:
        self.run("delete", self._delete, session_id)

    async def _delete(self, session_id: str) -> None:
        if await self.panel.ask(self.client.delete_session(session_id)) is UNANSWERED:
            return
        await self._forget(session_id)
        self.panel.refresh_status()
        self.load()

    async def _forget(self, session_id: str) -> None:
        """The open session was deleted (here or by another client): its transcript goes and
        the next message starts a new chat. A turn running in it was stopped by the service
        before it deleted the session; whether its `stopped` frame or the deletion reaches
        this client first, the turn's worker stops listening before the transcript goes
        (its reply would be rendered into a removed widget)."""
        if session_id != self.state.session_id:
            return
        for worker in self.panel.workers.cancel_group(self.panel, "turn"):
            with contextlib.suppress(WorkerCancelled, WorkerFailed):
                await worker.wait()
        if session_id != self.state.session_id:
            return  # forgotten meanwhile (the deletion's event and `d` both ask)
        self._stale = False  # nothing to re-read
        self.state.reset()
        await self.transcript.remove_children()
        self.panel.refresh_status()

    # -- live updates (the operator events stream, see SteelframeApp.watch_events) -------

    def result_arrived(self, session_id: str) -> None:
        """A task result was appended to `session_id`: show it if open, else mark it."""
        if session_id and session_id == self.state.session_id:
            self.refresh_transcript()
            self.run("seen", self._note_seen, session_id)
        elif session_id:
            self.unseen.add(session_id)
            self.load()

    async def _note_seen(self, session_id: str) -> None:
        """Shown in the open session: seen, so no dot comes back with the next list. Best
        effort: a failure here only leaves the dot for the next open to clear."""
        try:
            await self.client.mark_seen(session_id)
        except TRANSPORT_ERRORS:
            log.debug("could not mark session %s seen", session_id)

    def session_changed(self, session_id: str, change: str) -> None:
        self.load()
        if change == "forgotten" and session_id == self.state.session_id:
            # Words were taken out of the open transcript (a `forget`, from any client).
            self.refresh_transcript()
        if change == "deleted" and session_id == self.state.session_id:
            self.run("delete", self._forget, session_id)

    def refresh_transcript(self) -> None:
        """Re-read the open transcript; asked while a refresh runs, once more after it."""
        self.transcripts.ask()

    async def _refresh_transcript(self) -> None:
        """Re-read the open session (GET: reading pins nothing) and show it again; during a
        turn, after it (the turn's own reply must not be replaced mid-stream)."""
        session_id = self.state.session_id
        if session_id is None:
            return
        if self.state.busy:
            self._stale = True
            return
        session = await self.panel.ask(self.client.session(session_id))
        if session is UNANSWERED:
            return
        # Rendered by the panel's message loop (see `_load`: no cancelled mounts).
        self.panel.call_later(self._show_refreshed, session)

    async def _show_refreshed(self, session: Session) -> None:
        state = self.state
        if state.session_id != session.id or state.busy or state.switching:
            return  # (switching: the chat being opened is shown next, not this one)
        kept = self.state.focus_change, self.state.focus
        self.state.open_session(session)
        if kept[0] is not KEEP:  # a focus the operator set stays set
            self.state.focus_change, self.state.focus = kept
        await self.panel.switch.show_session(session)
        self.panel.refresh_status()

    def turn_ended(self) -> None:
        """A transcript that changed during the turn is read again now."""
        if self._stale:
            self._stale = False
            self.refresh_transcript()
