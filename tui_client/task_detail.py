"""The Board's task detail: why a task is where it is, its pull request, its event log and
its usage (GET /api/operator/tasks/{id}), in a modal the operator closes with esc."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from tui_client.keys_footer import KeysFooter
from tui_client.task_ci import ci_lines
from tui_client.task_leverage import cost_text, leverage_lines
from tui_client.tasks_wire import TaskDetail

EVENTS_SHOWN = 30


def why(detail: TaskDetail) -> str:
    """The one line that answers "why is it like this?" for the task's state."""
    state = detail.state
    if state == "waiting_for_info":
        question = " ".join((detail.question or "").split())
        return f"Waiting for a Decision on #{detail.issue}: {question or '(no question)'}"
    if state == "failed":
        return f"Failed: {detail.last_error or 'no reason recorded'}"
    if state == "delivered":
        return f"Delivered: {detail.pr_url or 'pull request unknown'}"
    if state == "running":
        holder = f" on {detail.lease.holder}" if detail.lease else ""
        return f"Running (attempt {detail.attempts}){holder}"
    if state == "queued":
        return "Queued: waiting for a worker" + (
            f" (last error: {detail.last_error})" if detail.last_error else ""
        )
    last = (detail.last_event.detail if detail.last_event else None) or ""
    return f"{state.capitalize()}: {last}".rstrip(": ")


def dollars(usd: float) -> str:
    """What a task cost, as people read money ("" before the runtime reported any)."""
    if not usd:
        return ""
    return "<$0.01" if usd < 0.01 else f"${usd:.2f}"


# The thread states in the words the GUI shows (web_gui/static/pull.js, THREAD_WORDS).
THREAD_WORDS = {"needs_operator": "needs operator"}
PR_WORDS = {"draft": "draft", "open": "open", "merged": "merged", "closed": "closed"}


def blocked_lines(detail: TaskDetail) -> list[str]:
    """What the runs' egress proxies refused, a line per host and run (none: nothing)."""
    if not detail.blocked:
        return []
    lines = ["", "Blocked requests (not on the run's allowlist, or a private address):"]
    for entry in detail.blocked:
        lines.append(
            f"  attempt {entry.attempt}: {entry.host}:{entry.port} "
            f"× {entry.count} · {entry.reason}".rstrip(" ·")
        )
    return lines


def thread_lines(detail: TaskDetail) -> list[str]:
    """The review thread ledger: what is open, what was addressed (commit) or declined."""
    if not detail.review_threads:
        return []
    ready = "ready for review" if detail.ready_for_review else "not ready for review"
    summary = detail.review.summary
    lines = ["", f"Review threads ({f'{summary} · ' if summary else ''}{ready}):"]
    for thread in detail.review_threads:
        where = f"{thread.path}:{thread.line}" if thread.path else "review"
        note = (thread.commit or thread.reason or "")[:60]
        state = THREAD_WORDS.get(thread.state, thread.state)
        lines.append(f"  {state} {where} @{thread.author} {note}".rstrip())
    return lines


def pull_line(detail: TaskDetail) -> str:
    """The pull request and its state: "Pull request (merged): URL"."""
    url = detail.pr_url
    if not url:
        return "Pull request: none yet"
    state = PR_WORDS.get(detail.pr_state or "")
    return f"Pull request ({state}): {url}" if state else f"Pull request: {url}"


def detail_lines(detail: TaskDetail) -> list[str]:
    usage = detail.usage
    lines = [
        f"#{detail.issue} {detail.title} · {detail.state}",
        why(detail),
        pull_line(detail),
        f"Attempts {detail.attempts} · tokens {usage.tokens} · "
        f"{cost_text(usage, dollars(usage.cost_usd))} · "
        f"runtime {usage.runtime_seconds:.1f} s",
        *leverage_lines(detail),  # plan, budget hold, estimate, offered Decisions
        *blocked_lines(detail),
        *thread_lines(detail),
        *ci_lines(detail.ci),  # failing CI per head commit and its fix runs
        "",
        "Events:",
    ]
    for event in detail.events[-EVENTS_SHOWN:]:
        at = event.at[11:19]
        move = f"{event.from_ or ''}→{event.to}" if event.to else ""
        text = " ".join((event.detail or "").split())
        lines.append(f"  {at} {event.kind} {move} {text}".rstrip())
    return lines


class TaskDetailScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "close", "Close")]

    def __init__(self, detail: TaskDetail) -> None:
        super().__init__(classes="modal")
        self.detail = detail
        self.lines = detail_lines(detail)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog task-detail"):
            yield Label(self.lines[0], markup=False, classes="question")
            with VerticalScroll():
                yield Static("\n".join(self.lines[1:]), markup=False, id="task-detail-text")
            yield Label("esc close", classes="hint")
        yield KeysFooter()  # its keys, not the Board's beneath (which do nothing here)

    def action_close(self) -> None:
        self.dismiss(None)
