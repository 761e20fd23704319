"""The Board's task detail: why a task is where it is, its pull request, its event log and
its usage (GET /api/operator/tasks/{id}), in a modal the operator closes with esc."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from tui_client.task_ci import ci_lines
from tui_client.task_leverage import cost_text, leverage_lines

EVENTS_SHOWN = 30


def why(detail: dict[str, Any]) -> str:
    """The one line that answers "why is it like this?" for the task's state."""
    state = detail.get("state")
    if state == "waiting_for_info":
        question = " ".join(str(detail.get("question") or "").split())
        return f"Waiting for a Decision on #{detail.get('issue')}: {question or '(no question)'}"
    if state == "failed":
        return f"Failed: {detail.get('last_error') or 'no reason recorded'}"
    if state == "delivered":
        return f"Delivered: {detail.get('pr_url') or 'pull request unknown'}"
    if state == "running":
        lease = detail.get("lease") or {}
        holder = lease.get("holder")
        return f"Running (attempt {detail.get('attempts')})" + (f" on {holder}" if holder else "")
    if state == "queued":
        return "Queued: waiting for a worker" + (
            f" (last error: {detail['last_error']})" if detail.get("last_error") else ""
        )
    last = detail.get("last_event") or {}
    return f"{str(state).capitalize()}: {last.get('detail') or ''}".rstrip(": ")


def dollars(usd: float) -> str:
    """What a task cost, as people read money ("" before the runtime reported any)."""
    if not usd:
        return ""
    return "<$0.01" if usd < 0.01 else f"${usd:.2f}"


# The thread states in the words the GUI shows (web_gui/static/pull.js, THREAD_WORDS).
THREAD_WORDS = {"needs_operator": "needs operator"}
PR_WORDS = {"draft": "draft", "open": "open", "merged": "merged", "closed": "closed"}


def blocked_lines(detail: dict[str, Any]) -> list[str]:
    """What the runs' egress proxies refused, a line per host and run (none: nothing)."""
    blocked = list(detail.get("blocked") or [])
    if not blocked:
        return []
    lines = ["", "Blocked requests (not on the run's allowlist, or a private address):"]
    for entry in blocked:
        count = int(entry.get("count") or 0)
        lines.append(
            f"  attempt {entry.get('attempt')}: {entry.get('host')}:{entry.get('port')} "
            f"× {count} · {entry.get('reason') or ''}".rstrip(" ·")
        )
    return lines


def thread_lines(detail: dict[str, Any]) -> list[str]:
    """The review thread ledger: what is open, what was addressed (commit) or declined."""
    threads = list(detail.get("review_threads") or [])
    if not threads:
        return []
    ready = "ready for review" if detail.get("ready_for_review") else "not ready for review"
    summary = str((detail.get("review") or {}).get("summary") or "")
    lines = ["", f"Review threads ({f'{summary} · ' if summary else ''}{ready}):"]
    for thread in threads:
        where = f"{thread.get('path')}:{thread.get('line')}" if thread.get("path") else "review"
        note = str(thread.get("commit") or thread.get("reason") or "")[:60]
        state = THREAD_WORDS.get(str(thread.get("state")), str(thread.get("state")))
        lines.append(f"  {state} {where} @{thread.get('author')} {note}".rstrip())
    return lines


def pull_line(detail: dict[str, Any]) -> str:
    """The pull request and its state: "Pull request (merged): URL"."""
    url = detail.get("pr_url")
    if not url:
        return "Pull request: none yet"
    state = PR_WORDS.get(str(detail.get("pr_state")))
    return f"Pull request ({state}): {url}" if state else f"Pull request: {url}"


def detail_lines(detail: dict[str, Any]) -> list[str]:
    usage = detail.get("usage") or {}
    lines = [
        f"#{detail.get('issue')} {detail.get('title') or ''} · {detail.get('state')}",
        why(detail),
        pull_line(detail),
        f"Attempts {detail.get('attempts', 0)} · tokens {usage.get('tokens', 0)} · "
        f"{cost_text(usage, dollars(float(usage.get('cost_usd') or 0)))} · "
        f"runtime {float(usage.get('runtime_seconds') or 0):.1f} s",
        *leverage_lines(detail),  # plan, budget hold, estimate, offered Decisions
        *blocked_lines(detail),
        *thread_lines(detail),
        *ci_lines(detail),  # failing CI per head commit and its fix runs
        "",
        "Events:",
    ]
    events = list(detail.get("events") or [])[-EVENTS_SHOWN:]
    for event in events:
        at = str(event.get("at") or "")[11:19]
        move = f"{event.get('from') or ''}→{event.get('to')}" if event.get("to") else ""
        text = " ".join(str(event.get("detail") or "").split())
        lines.append(f"  {at} {event.get('kind')} {move} {text}".rstrip())
    return lines


class TaskDetailScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "close", "Close")]

    def __init__(self, detail: dict[str, Any]) -> None:
        super().__init__(classes="modal")
        self.detail = detail
        self.lines = detail_lines(detail)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog task-detail"):
            yield Label(self.lines[0], markup=False, classes="question")
            with VerticalScroll():
                yield Static("\n".join(self.lines[1:]), markup=False, id="task-detail-text")
            yield Label("esc close", classes="hint")

    def action_close(self) -> None:
        self.dismiss(None)
