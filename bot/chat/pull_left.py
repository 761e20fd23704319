"""Chat's answer to "what is left on #N?": the task's pull request and its review thread
ledger in words, read from the database (no model, so the same with any runtime).

Open threads come first (who, where, what they said), then what was addressed (with the
commit), declined (with the reason) or waits for the operator (the question), then whether
the task is ready for review. The words for states are bot.lifecycle.pull_view's, the ones
the Board and the TUI show. A reviewer's text is untrusted: quoted, cut short, and escaped
so that it renders as the words it is (no link, no markup of its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy.orm import Session

from bot.lifecycle import pull_view
from bot.lifecycle.models import ReviewThread, ThreadState
from bot.lifecycle.review_ledger import EXCERPT_CHARS, excerpt, review_threads
from bot.lifecycle.tasks import find_task

COMMIT_CHARS = 7
REASON_CHARS = 200
# Characters that make markdown of plain words (links, images, emphasis, code, html) and
# `#N`, which the GUI links to a run.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#!|<>~])")
_PR_WORDS = {
    pull_view.PullState.DRAFT: "is a draft",
    pull_view.PullState.OPEN: "is open",
    pull_view.PullState.MERGED: "was merged",
    pull_view.PullState.CLOSED: "was closed without a merge",
}
_SECTIONS = (
    (ThreadState.OPEN, "Open"),
    (ThreadState.NEEDS_OPERATOR, "Needs the operator"),
    (ThreadState.ADDRESSED, "Addressed"),
    (ThreadState.DECLINED, "Declined"),
)


@dataclass(frozen=True)
class Left:
    """What the answer is made of, read in one transaction."""

    issue: int
    title: str
    state: str
    pr_url: str | None
    view: pull_view.PullView
    threads: list[ReviewThread]


def read_left(session: Session, repo: str, issue: int) -> Left | None:
    task = find_task(session, repo, issue)
    if task is None:
        return None
    threads = review_threads(session, task.id)
    view = pull_view.views_of(session, [task])[task.id]
    session.expunge_all()  # read after the transaction: the rows are plain values now
    return Left(issue, task.title, task.state, task.pr_url, view, threads)


def what_is_left(left: Left | None, issue: int) -> str:
    if left is None:
        return f"#{issue} has no task: label it to start one, or file it in Chat."
    head = _headline(left)
    if left.view.pr_state is None:
        return f"{head} It has no pull request yet (the task is {_state(left.state)})."
    lines = [head]
    for state, label in _SECTIONS:
        rows = [t for t in left.threads if t.state == state]
        if rows:
            lines += ["", f"{label} ({len(rows)}):", *(_thread_line(t) for t in rows)]
    lines += ["", _verdict(left)]
    return "\n".join(lines)


def _headline(left: Left) -> str:
    name = f"#{left.issue} ({_quoted(left.title, 80)})" if left.title else f"#{left.issue}"
    state = left.view.pr_state
    if state is None:
        return f"{name}:"
    pull = f"its pull request {left.pr_url}" if left.pr_url else "its pull request"
    summary = left.view.review.words()
    ledger = f"review threads: {summary}" if summary else "no review threads yet"
    return f"{name}: {pull} {_PR_WORDS[state]}; {ledger}."


def _verdict(left: Left) -> str:
    state = left.view.pr_state
    if state in (pull_view.PullState.MERGED, pull_view.PullState.CLOSED):
        return f"Nothing is left: the task is {left.state} (final)."
    if left.view.ready_for_review:
        return "Ready for review: no thread is open."
    counts = left.view.review
    if counts.open:
        return f"Not ready for review: {counts.open} open thread(s) to answer."
    return f"Not ready for review: the task is {_state(left.state)}."


def _thread_line(thread: ReviewThread) -> str:
    where = f"{thread.path}:{thread.line}" if thread.path else "the review"
    said = f" said {_quoted(excerpt(thread.text))}" if thread.text.strip() else ""
    line = f"- @{_escaped(thread.author)} on {_escaped(where)}{said}"
    if thread.state == ThreadState.ADDRESSED and thread.commit:
        line += f"; addressed in commit {_escaped(thread.commit[:COMMIT_CHARS])}"
    elif thread.state == ThreadState.DECLINED:
        line += f"; declined: {_quoted(thread.reason or 'no reason given', REASON_CHARS)}"
    elif thread.state == ThreadState.NEEDS_OPERATOR:
        line += f"; the question: {_quoted(thread.reason or '(not recorded)', REASON_CHARS)}"
    return line + (f" ({thread.url})" if thread.url else "")


def _state(state: str) -> str:
    return state.replace("_", " ")


def _quoted(text: str, limit: int = EXCERPT_CHARS) -> str:
    return f"“{_escaped(excerpt(text, limit))}”"


def _escaped(text: str) -> str:
    return _MARKDOWN.sub(r"\\\1", text)
