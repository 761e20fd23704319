"""Switching chats: a new chat (ctrl+n, Discuss) or a reopened one, the message held while
the service answers, and showing the opened session's transcript.

Until the service answers a new chat or a reopen, the session the next message goes to is
unknown (the service still pins the old one). The composer stays usable, but a message sent
meanwhile is held and sent once the chat is open: typed right after ctrl+n, it is meant for
the new chat, never for the one still on screen.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from textual.widget import Widget

from tui_client.chat_part import ChatPart
from tui_client.failures import UNANSWERED, Unanswered
from tui_client.reply import FinishedReply
from tui_client.sessions_wire import Session
from tui_client.transcript import AssistantMessage, UserMessage

if TYPE_CHECKING:
    from tui_client.chat import ChatPanel

T = TypeVar("T")
ONE_WAITS = (
    "Not sent: a message already waits for the chat being opened. This one stays in the"
    " composer: send it once the chat is open."
)


class ChatSwitch(ChatPart):
    _draft_at_switch = ""  # the composer's text when a new chat was asked for
    _left: str | None = None  # the chat on screen then

    def __init__(self, panel: ChatPanel) -> None:
        super().__init__(panel)
        # Drafts left in chats by ctrl+n, by session: given back when the chat is reopened
        # (neither sent to the new chat nor lost; the web GUI keeps a draft with its chat).
        self.drafts: dict[str, str] = {}

    def begin(self) -> bool:
        """Called synchronously by the key or click, before the worker starts: an Enter
        pressed right after ctrl+n is already held. False: refused, a turn is in flight
        (the switch would leave its reply streaming into a transcript no longer shown)."""
        if self.state.busy:
            self.panel.call_later(self.panel.refuse_while_busy)
            return False
        if not self.state.switching:  # a second ctrl+n: text typed since the first is kept
            self._draft_at_switch, self._left = self.composer.value, self.state.session_id
        self.state.switching = True
        self.panel.refresh_status()
        return True

    async def hold(self, text: str) -> None:
        """Enter while the chat opens: the message waits for it. One message only: it starts
        the new chat's turn, and a second would be refused by that turn as any Enter during
        a turn is; it is refused here, with a note, and stays in the composer."""
        if self.state.held is None:
            self.state.held = text
            self.composer.value = ""
        else:
            await self.panel.notice(ONE_WAITS, kind="error")
        self.panel.refresh_status()

    async def _answer(self, request: Awaitable[T]) -> T | Unanswered:
        """The opened session, or UNANSWERED with the error shown and a held message back
        in the composer (never sent to the old session: the operator sends it again)."""
        session = await self.panel.ask(request)
        if session is UNANSWERED:
            state, composer = self.state, self.composer
            state.switching = False
            held, state.held = state.held, None
            if held is not None:
                composer.put_back(held)
                await self.panel.notice(
                    "Not sent: the chat did not open. Your message is back in the composer.",
                    kind="error",
                )
            self.panel.refresh_status()
            return UNANSWERED
        self.state.offline = None
        return session

    def _done(self) -> None:
        """The chat is open and shown: a message held meanwhile is its first."""
        state = self.state
        state.switching = False
        held, state.held = state.held, None
        if held is not None and state.busy:  # the chat opened has a turn running
            self.composer.put_back(held)
            self.panel.call_later(self.panel.refuse_while_busy)
        elif held is not None:
            self.panel.turn.start(held)
        self.panel.refresh_status()

    # -- reopening a session -------------------------------------------------------------

    def open_session(self, session_id: str) -> None:
        """Reopen a session: its transcript, Decision draft and proposal; the service pins
        the next message to it."""
        if self.begin():
            self.run("open", self._open_session, session_id)

    async def _open_session(self, session_id: str) -> None:
        session = await self._answer(self.client.open_session(session_id))
        if session is UNANSWERED:
            return
        self.state.open_session(session)
        await self.show_session(session)
        if self.composer.value == "" and self.state.held is None:
            self.composer.value = self.drafts.pop(session_id, "")
        self._done()
        self.panel.listing.opened(session_id)

    async def show_session(self, session: Session) -> None:
        """The session's messages in the transcript, the Decision draft under the last reply."""
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
                decision = self.state.decision if index == last_assistant else None
                await widget.finish(FinishedReply.stored(message), decision=decision)
        transcript.scroll_end(animate=False)
        if session.turn_in_flight and not self.state.busy:
            self.panel.turn.attach(session.id)  # its messages are stored once it ends

    # -- a new chat ----------------------------------------------------------------------

    def new_chat(self, issue: int | None = None) -> None:
        """A fresh session; with an issue, a Discuss session focused on it. Nothing is sent."""
        if self.begin():
            self.run("open", self._new_chat, issue)

    async def _new_chat(self, issue: int | None) -> None:
        title = f"Discuss #{issue}" if issue is not None else None
        session = await self._answer(self.client.new_session(title=title, issue=issue))
        if session is UNANSWERED:
            return
        self.state.open_session(session)
        await self.transcript.remove_children()
        composer = self.composer
        # A draft meant for the old chat waits for it; text typed since ctrl+n is for this one.
        if composer.value == self._draft_at_switch:
            if composer.value and self._left is not None:
                self.drafts[self._left] = composer.value
            composer.value = ""
        composer.focus()
        self._done()
        self.panel.listing.load()
