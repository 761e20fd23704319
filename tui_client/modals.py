"""Modal screens: a yes/no confirmation, an issue-number prompt and a task's run log."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from tui_client.keys_footer import KeysFooter
from tui_client.tasks_wire import TaskLog


class ConfirmScreen(ModalScreen[bool]):
    """Asks before anything is deleted, terminated or archived; dismisses with the answer."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__(classes="modal")
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, markup=False, classes="question")
            with Horizontal(classes="buttons"):
                yield Button("Yes (y)", id="yes", variant="error")
                yield Button("No (n)", id="no", variant="primary")
        yield KeysFooter()  # its keys, not those of the screen beneath (which do nothing)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class IssuePrompt(ModalScreen[int | None]):
    """Asks for an issue number (Discuss, focus); None when cancelled. With `allow_empty`,
    Enter on nothing answers 0 ("no issue": clear the focus)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self, question: str = "Discuss which issue?", *, allow_empty: bool = False
    ) -> None:
        super().__init__(classes="modal")
        self.question = question
        self.allow_empty = allow_empty

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, markup=False, classes="question")
            yield Input(placeholder="issue number, then Enter", type="integer", id="issue-number")
            yield Label("", id="issue-error", classes="error")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        if not value and self.allow_empty:
            self.dismiss(0)
            return
        if not value.isdigit() or int(value) <= 0:
            self.query_one("#issue-error", Label).update("an issue number is a positive integer")
            return
        self.dismiss(int(value))


class DecisionEditor(ModalScreen[str | None]):
    """Edit a Decision draft before publishing it; ctrl+s keeps the text, esc drops the edit."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Keep"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, issue: int, body: str) -> None:
        super().__init__(classes="modal")
        self.issue = issue
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog decision-editor"):
            yield Label(f"Decision draft for #{self.issue}", markup=False, classes="question")
            yield TextArea(self.body, id="decision-text")
            yield Label("ctrl+s keep · esc cancel · then P publishes", classes="hint")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text)

    def action_cancel(self) -> None:
        self.dismiss(None)


def log_text(log: TaskLog) -> str:
    """A task's runs (GET /api/operator/tasks/{id}/log) as plain text, newest last."""
    if not log.runs:
        return "No run has been logged for this task yet."
    parts = []
    for run in log.runs:
        head = f"— generation {run.generation}, attempt {run.attempt}: "
        parts.append(head + f"{run.status} at {run.at}")
        parts.append(run.text or "(no output)")
    return "\n".join(parts)


class LogScreen(ModalScreen[None]):
    """A task's private runtime log (already redacted by the worker); escape closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,l", "close", "Close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__(classes="modal")
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog log"):
            yield Label(self.title_text, markup=False, classes="question")
            with VerticalScroll():
                yield Static(self.text, markup=False, id="log-text")
            yield Label("esc close", classes="hint")
        yield KeysFooter()

    def action_close(self) -> None:
        self.dismiss(None)
