"""Chat's answer to "what is left on #N?": the task's pull request and its review thread
ledger in words (no model, so the same with any runtime), from the task JSON
(`bot.contracts.tasks.PullLeft`: the Board's card and ledger) read through the task reader
Chat is handed (bot.chat.task_reader).

Open threads come first (who, where, what they said), then what was addressed (with the
commit), declined (with the reason) or waits for the operator (the question), then whether
the task is ready for review. A reviewer's text is untrusted: quoted, cut short, and escaped
so that it renders as the words it is (no link, no markup of its own).
"""

from __future__ import annotations

import re

from bot.contracts.tasks import PullLeft, ReviewThread

COMMIT_CHARS = 7
REASON_CHARS = 200
EXCERPT_CHARS = 160  # as long as the ledger's excerpt of a reviewer's words
# Characters that make markdown of plain words (links, images, emphasis, code, html) and
# `#N`, which the GUI links to a run.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#!|<>~])")
_PR_WORDS = {
    "draft": "is a draft",
    "open": "is open",
    "merged": "was merged",
    "closed": "was closed without a merge",
}
_SECTIONS = (
    ("open", "Open"),
    ("needs_operator", "Needs the operator"),
    ("addressed", "Addressed"),
    ("declined", "Declined"),
)


def what_is_left(left: PullLeft | None, issue: int) -> str:
    if left is None:
        return f"#{issue} has no task: label it to start one, or file it in Chat."
    head = _headline(left)
    if left.task.pr_state is None:
        return f"{head} It has no pull request yet (the task is {_state(left.task.state)})."
    lines = [head]
    for state, label in _SECTIONS:
        rows = [t for t in left.threads if t.state == state]
        if rows:
            lines += ["", f"{label} ({len(rows)}):", *(_thread_line(t) for t in rows)]
    lines += ["", _verdict(left)]
    return "\n".join(lines)


def _headline(left: PullLeft) -> str:
    task = left.task
    name = f"#{task.issue} ({_quoted(task.title, 80)})" if task.title else f"#{task.issue}"
    state = task.pr_state
    if state is None:
        return f"{name}:"
    pull = f"its pull request {task.pr_url}" if task.pr_url else "its pull request"
    summary = task.review.summary
    ledger = f"review threads: {summary}" if summary else "no review threads yet"
    return f"{name}: {pull} {_PR_WORDS[state]}; {ledger}."


def _verdict(left: PullLeft) -> str:
    task = left.task
    if task.pr_state in ("merged", "closed"):
        return f"Nothing is left: the task is {task.state} (final)."
    if task.ready_for_review:
        return "Ready for review: no thread is open."
    if task.review.open:
        return f"Not ready for review: {task.review.open} open thread(s) to answer."
    return f"Not ready for review: the task is {_state(task.state)}."


def _thread_line(thread: ReviewThread) -> str:
    where = f"{thread.path}:{thread.line}" if thread.path else "the review"
    said = f" said {_quoted(thread.excerpt)}" if thread.excerpt.strip() else ""
    line = f"- @{_escaped(thread.author)} on {_escaped(where)}{said}"
    if thread.state == "addressed" and thread.commit:
        line += f"; addressed in commit {_escaped(thread.commit[:COMMIT_CHARS])}"
    elif thread.state == "declined":
        line += f"; declined: {_quoted(thread.reason or 'no reason given', REASON_CHARS)}"
    elif thread.state == "needs_operator":
        line += f"; the question: {_quoted(thread.reason or '(not recorded)', REASON_CHARS)}"
    return line + (f" ({thread.url})" if thread.url else "")


def _state(state: str) -> str:
    return state.replace("_", " ")


def _quoted(text: str, limit: int = EXCERPT_CHARS) -> str:
    return f"“{_escaped(_excerpt(text, limit))}”"


def _excerpt(text: str, limit: int) -> str:
    """The start of untrusted text on one line (as the ledger cuts a reviewer's words)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _escaped(text: str) -> str:
    return _MARKDOWN.sub(r"\\\1", text)
