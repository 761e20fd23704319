"""The Chat panel's own widgets: the session list and the composer with its keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input, Label, ListItem, ListView

from tui_client.chat_state import ChatState
from tui_client.sessions_wire import ListedSession

# A line break of a pasted message, as the composer's one line shows it (sent as "\n").
LINE_BREAK = "⏎"


def as_sent(value: str) -> str:
    """The composer's text as the message is sent: a pasted line break is one again."""
    return value.replace(LINE_BREAK, "\n")


class SessionItem(ListItem):
    def __init__(self, session: ListedSession, *, unseen: bool = False) -> None:
        super().__init__(classes="session-item")
        self.session_id = session.id
        self.label = Label(markup=False)
        self.show(session, unseen=unseen)

    def show(self, session: ListedSession, *, unseen: bool) -> None:
        # The service's label: the subject ("Flaky login test"), not "file an issue for the…".
        self.title = session.label or session.title or "New chat"
        self.focus_issue = session.focus
        self.unseen = unseen  # a task result arrived since the operator last looked
        text = f"● {self.title}" if unseen else self.title
        if self.label.content != text:  # live updates re-read the list often, mostly unchanged
            self.label.update(text)

    def compose(self) -> ComposeResult:
        yield self.label


class SessionList(ListView):
    """The operator's chat sessions, newest activity first (as the service orders them)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "delete_session", "Delete chat"),
        Binding("e", "discuss", "Discuss #N"),
    ]

    class DeleteRequested(Message):
        def __init__(self, session_id: str, title: str) -> None:
            super().__init__()
            self.session_id = session_id
            self.title = title

    class DiscussRequested(Message):
        pass

    def action_delete_session(self) -> None:
        item = self.highlighted_child
        if isinstance(item, SessionItem):
            self.post_message(self.DeleteRequested(item.session_id, item.title))

    def action_discuss(self) -> None:
        self.post_message(self.DiscussRequested())

    async def show(
        self,
        sessions: list[ListedSession],
        *,
        unseen: Callable[[ListedSession], bool],
        current: str | None,
    ) -> None:
        """Show the service's list, highlighting the open session (`current`) unless the
        operator is moving through the list. Live updates re-read the list often: the same
        sessions in the same order are updated in place, so a highlight the operator moved
        is not reset under their keys, and nothing is briefly missing for `enter` to miss."""
        items = list(self.query_children(SessionItem))
        if [item.session_id for item in items] == [s.id for s in sessions]:
            for item, session in zip(items, sessions, strict=True):
                item.show(session, unseen=unseen(session))
            if not self.has_focus:
                self._highlight(current)
            return
        highlighted = self.highlighted_child
        kept = highlighted.session_id if isinstance(highlighted, SessionItem) else None
        await self.clear()
        await self.extend(SessionItem(session, unseen=unseen(session)) for session in sessions)
        ids = [session.id for session in sessions]
        self._highlight(kept if self.has_focus and kept in ids else current)

    def _highlight(self, session_id: str | None) -> None:
        for index, item in enumerate(self.query_children(SessionItem)):
            if item.session_id == session_id:
                self.index = index


class Composer(Input):
    """The message box. With nothing typed, `P` publishes a Decision draft and `y` files a
    pending proposal; otherwise those keys are just letters."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Priority: an Input swallows printable keys before ordinary bindings see them.
        # When `check_action` says no, the key falls through and is typed as usual.
        Binding("P", "publish", "Publish decision", priority=True),
        Binding("D", "edit_decision", "Edit decision", priority=True),
        Binding("y", "file", "File issue", priority=True),
    ]

    class Publish(Message):
        pass

    class EditDecision(Message):
        pass

    class File(Message):
        pass

    def __init__(self, state: ChatState, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.state = state

    def put_back(self, message: str) -> None:
        """A message not sent, back ahead of anything typed since, the cursor at its end."""
        shown = message.replace("\n", LINE_BREAK)
        self.value = f"{shown} {self.value}".rstrip()
        self.cursor_position = len(self.value)

    def _on_paste(self, event: events.Paste) -> None:
        """Every line of a paste (a traceback, a log excerpt): Textual's Input keeps only
        the first and drops the rest without a word. Each break shows as LINE_BREAK."""
        lines = event.text.rstrip("\r\n").splitlines()
        if len(lines) < 2:
            return  # one line: Input's own handler (next in the MRO) inserts it
        event.prevent_default()  # not Input's: it would insert the first line again
        event.stop()
        text, selection = LINE_BREAK.join(lines), self.selection
        if selection.is_empty:
            self.insert_text_at_cursor(text)
        else:
            self.replace(text, *selection)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "publish":
            return self.value == "" and not self.state.busy and self.state.has_decision
        if action == "edit_decision":
            return self.value == "" and not self.state.busy and self.state.has_decision
        if action == "file":
            return self.value == "" and not self.state.busy and self.state.can_file
        return super().check_action(action, parameters)

    def action_publish(self) -> None:
        self.post_message(self.Publish())

    def action_edit_decision(self) -> None:
        self.post_message(self.EditDecision())

    def action_file(self) -> None:
        self.post_message(self.File())
