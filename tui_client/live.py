"""What the operator events stream means for the TUI, as pure values: which events deserve
a notification and in what words (docs/api.md, "Events"), review pickups and CI fix runs
included. The app applies them: the Board row, the session list and an open transcript
refresh; these words pop up."""

from __future__ import annotations

from typing import Any

from textual.notifications import SeverityLevel

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


def task_notice(frame: dict[str, Any]) -> tuple[str, SeverityLevel] | None:
    """(text, severity) for a `task` event worth a notification, else None."""
    state = str(frame.get("state") or "")
    if state not in NOTIFY_STATES:
        return None
    words, severity = NOTIFY_STATES[state]
    text = f"#{frame.get('issue')} {frame.get('title') or ''} {words}".replace("  ", " ")
    if state in WITH_PR_LINK and frame.get("pr_url"):
        text += f": {frame['pr_url']}"
    elif frame.get("reason") and state not in WITH_PR_LINK:
        text += f": {_short(str(frame['reason']))}"
    return text, severity


def news_notice(frame: dict[str, Any], issue: object = None) -> str | None:
    """The words for a `review` event (a review run took threads up) or a `fix_run` event
    (failing CI started a fix run), as the GUI says them; `issue` when the frame has none."""
    named = f"#{frame.get('issue') or issue}" if frame.get("issue") or issue else None
    name = named or f"Task {frame.get('task_id')}"
    if frame.get("type") == "review":
        count = len(frame.get("threads") or [])
        return f"{name}: answering {count} review thread{'' if count == 1 else 's'}"
    if frame.get("type") == "fix_run":
        bound = f" of {frame['of']}" if frame.get("of") else ""
        sha = str(frame.get("head_sha") or "")[:7]
        return f"{name}: CI failed on {sha}, fix run {frame.get('run')}{bound}"
    return None


def _short(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
