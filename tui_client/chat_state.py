"""What the Chat panel knows about its session, and the status line that follows from it.

Pure values: the widgets update a `ChatState` from frames and responses; `status_line`
turns it into the one line of text under the transcript (spec: Discuss and Decision).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size

from tui_client.api import KEEP, Keep
from tui_client.sessions_wire import ChatResponse, NewSession, Session

DECIDE = "decide"


@dataclass
class ChatState:
    session_id: str | None = None
    title: str | None = None
    focus: int | None = None
    decision_body: str | None = None
    decision_issue: int | None = None
    pending_title: str | None = None
    intent: str | None = None
    # `busy` and `phase` belong to the turn in flight: only the turn (tui_client/chat_turn.py:
    # the Enter that starts it, its worker) sets and clears them, never a switch of session,
    # so a chat opening cannot make a running turn look finished (and unstoppable) while it
    # streams on.
    busy: bool = False
    phase: str = ""
    # A new chat or a reopen was asked for and the service has not answered yet: the
    # session the next message goes to is not known, so a message sent now is `held` and
    # goes to the chat being opened once it is open (never to the one still on screen).
    # One message: a second Enter meanwhile is refused (tui_client/chat_switch.py).
    switching: bool = False
    held: str | None = None
    offline: str | None = None  # why the service is unusable right now, if it is
    # A focus set (issue) or cleared (None) with `f`, sent with the next message; KEEP: none.
    focus_change: int | Keep | None = KEEP
    # The service's draft a `D` edit was made from. The edit lives here until published (the
    # service keeps the drafted text): while the service's draft is still that one, what a
    # live re-read of the session or the next turn's answer says is the unedited draft.
    edited_from: str | None = None
    # The message given back unsent, its session and its idempotency key: sent again (the
    # same text to the same session) it carries the same key, so if the service did take it
    # the first time, it runs no second turn (docs/api.md, "One turn per key").
    unsent: tuple[str, str | None, str] | None = None

    def send_key(self, text: str) -> str:
        """The key of a message about to be sent: the unsent one's when it is that message
        again, else a new one."""
        unsent, self.unsent = self.unsent, None
        if unsent is not None and unsent[:2] == (text, self.session_id):
            return unsent[2]
        return uuid.uuid4().hex

    @property
    def has_decision(self) -> bool:
        return bool(self.decision_body and self.decision_issue)

    @property
    def decision(self) -> tuple[str, int] | None:
        """The Decision draft and its issue, shown under the last reply."""
        if self.decision_body and self.decision_issue:
            return self.decision_body, self.decision_issue
        return None

    @property
    def can_file(self) -> bool:
        """`y` files only a pending proposal, and never after a `decide` turn."""
        return bool(self.pending_title) and self.intent != DECIDE

    def reset(self) -> None:
        """Forget the session; a turn in flight, a switch under way and a held message are
        the panel's work in progress, not the session's, and stay."""
        work = self.busy, self.phase, self.switching, self.held
        vars(self).update(vars(ChatState()))
        self.busy, self.phase, self.switching, self.held = work

    def open_session(self, session: Session | NewSession) -> None:
        """Adopt a session as GET /chat/session/{id} or POST /chat/new returns it."""
        if session.id != self.session_id:
            self.edited_from = None  # another chat: an edit was of the draft left behind
        self.session_id = session.id
        self.title = session.label or session.title  # as the session list calls it
        self.focus = session.focus
        decision = session.decision
        self.adopt_decision(
            decision.body if decision else None, decision.issue if decision else None
        )
        self.pending_title = session.pending.title if session.pending else None
        messages = session.messages if isinstance(session, Session) else []
        assistant = [m for m in messages if m.role == "assistant"]
        self.intent = assistant[-1].intent if assistant else None
        self.focus_change = KEEP

    def finish_turn(self, response: ChatResponse) -> None:
        """Adopt a `done` frame's ChatResponse. The turn stays `busy` until its worker has
        shown the reply (the turn's worker clears it): a message sent in between would cancel
        that worker mid-render, losing the hits row, the Decision draft and the new title."""
        self.session_id = response.session or self.session_id
        self.focus = response.focus
        self.intent = response.intent
        self.adopt_decision(response.decision_body, response.decision_issue)
        self.pending_title = None if self.intent == DECIDE else response.pending_title
        if response.filed_issue_number:
            self.pending_title = None

    def adopt_decision(self, body: str | None, issue: int | None) -> None:
        """The service's draft, unless it is the one the operator edited (kept, edited)."""
        if self.edited_from is not None and (body, issue) == (
            self.edited_from,
            self.decision_issue,
        ):
            return
        self.decision_body, self.decision_issue, self.edited_from = body, issue, None

    def edit_decision(self, text: str) -> None:
        if self.edited_from is None:
            self.edited_from = self.decision_body
        self.decision_body = text

    def clear_decision(self) -> None:
        self.decision_body = None
        self.decision_issue = None
        self.edited_from = None


def status_line(state: ChatState, *, composer_empty: bool, width: int | None = None) -> str:
    """The status line; within `width` cells, a title too long is cut (`…`) rather than
    the key after it: at 80 columns a proposal's title pushed "press y to file" out."""
    head, title, tail = _status_parts(state, composer_empty=composer_empty)
    if width is not None and cell_len(head + title + tail) > width:
        room = max(width - cell_len(head + tail) - 1, 1)
        title = set_cell_size(title, room).rstrip() + "…"
    return head + title + tail


def header_line(state: ChatState, *, width: int | None = None) -> str:
    """The chat's header: its title and focus; within `width` cells, a title too long is
    cut (`…`) rather than wrapped onto a second line or the focus after it cut."""
    title = state.title or "New chat"
    focus = f" · focused on #{state.focus}" if state.focus is not None else ""
    if width is not None and cell_len(title + focus) > width:
        room = max(width - cell_len(focus) - 1, 1)
        title = set_cell_size(title, room).rstrip() + "…"
    return title + focus


def _status_parts(state: ChatState, *, composer_empty: bool) -> tuple[str, str, str]:
    """The status line as the text before the title it names, the title, the text after."""
    if state.offline:
        return f"Chat · {state.offline} · ctrl+r retry", "", ""
    if state.busy:
        return f"Chat · {state.phase or 'sending'} · esc stop", "", ""
    if state.switching:
        waiting = " · your message is sent to it once it is open" if state.held else ""
        return f"Chat · opening the chat…{waiting}", "", ""
    if composer_empty and state.has_decision:
        return f"Chat · Decision draft · P publish to #{state.decision_issue}", "", ""
    if composer_empty and state.can_file:
        return 'Chat · Proposal "', state.pending_title or "", '" · press y to file'
    tail = ""
    if state.focus_change is not KEEP:
        change = f"#{state.focus_change}" if state.focus_change is not None else "none"
        tail = f" · focus → {change} with the next message"
    elif state.focus is not None:
        tail = f" · focused on #{state.focus}"
    return "Chat · ", state.title or "New chat", tail
