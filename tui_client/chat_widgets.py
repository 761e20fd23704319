"""The Chat panel's own widgets: the session list and the composer with its keys."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input, Label, ListItem, ListView

from tui_client.chat_state import ChatState


class SessionItem(ListItem):
    def __init__(self, session: dict[str, Any], *, unseen: bool = False) -> None:
        super().__init__(classes="session-item")
        self.session_id = str(session["id"])
        # The service's label: the subject ("Flaky login test"), not "file an issue for the…".
        self.title = str(session.get("label") or session.get("title") or "New chat")
        self.focus_issue = session.get("focus")
        self.unseen = unseen  # a task result arrived since the operator last looked

    def compose(self) -> ComposeResult:
        yield Label(f"● {self.title}" if self.unseen else self.title, markup=False)


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
