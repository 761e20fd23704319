"""What the operator events stream means for the TUI, as pure values: which events deserve
a notification and in what words (docs/api.md, "Events"), review pickups and CI fix runs
included. The app applies them: the Board row, the session list and an open transcript
refresh; these words pop up."""

from __future__ import annotations

from textual.notifications import SeverityLevel

from tui_client.events_wire import FixRunFrame, ReviewFrame, TaskFrame

# Task states worth interrupting the operator for: the work needs them or is done.
NOTIFY_STATES: dict[str, tuple[str, SeverityLevel]] = {
    "delivered": ("delivered", "information"),
    "waiting_for_info": ("waits for a Decision", "warning"),
    "failed": ("failed", "error"),
    # The end of the pull request loop, in the GUI's words, with the pull request's link.
    "merged": ("was merged", "information"),
    "closed": ("was closed without a merge", "warning"),
}
WITH_PR_LINK = frozenset({"delivered", "merged", "closed"})


def task_notice(frame: TaskFrame) -> tuple[str, SeverityLevel] | None:
    """(text, severity) for a `task` event worth a notification, else None."""
    if frame.state not in NOTIFY_STATES:
        return None
    words, severity = NOTIFY_STATES[frame.state]
    text = f"#{frame.issue} {frame.title} {words}".replace("  ", " ")
    if frame.state in WITH_PR_LINK and frame.pr_url:
        text += f": {frame.pr_url}"
    elif frame.question or (frame.reason and frame.state not in WITH_PR_LINK):
        # A waiting task says what it asks (the frame carries it), not "asked a question".
        text += f": {_short(frame.question or frame.reason)}"
    return text, severity


def news_notice(frame: ReviewFrame | FixRunFrame, issue: int | None = None) -> str:
    """The words for a `review` event (a review run took threads up) or a `fix_run` event
    (failing CI started a fix run), as the GUI says them; `issue` when the frame has none."""
    known = (frame.issue if isinstance(frame, ReviewFrame) else None) or issue
    name = f"#{known}" if known else f"Task {frame.task_id}"
    if isinstance(frame, ReviewFrame):
        count = len(frame.threads)
        return f"{name}: answering {count} review thread{'' if count == 1 else 's'}"
    bound = f" of {frame.of}" if frame.of else ""
    return f"{name}: CI failed on {frame.head_sha[:7]}, fix run {frame.run}{bound}"


def _short(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
