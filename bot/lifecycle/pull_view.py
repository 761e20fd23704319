"""The pull request loop as operators see it: the pull request's state, the review thread
ledger in counts and words, and whether the task is ready for review.

One set of words for every surface (the task JSON, the events stream, Chat's "what is left
on #N?", the GUI's Board card and run modal, the TUI's Board and task detail), so a state
reads the same wherever the operator looks (docs/api.md, "Review threads").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, defer

from bot.lifecycle.models import ReviewThread, Task, TaskEvent, ThreadState
from bot.lifecycle.review_ledger import ready_for_review
from bot.lifecycle.states import TaskState

# How each thread state reads to a person (the JSON keeps the machine value).
THREAD_WORDS: dict[str, str] = {
    ThreadState.OPEN: "open",
    ThreadState.ADDRESSED: "addressed",
    ThreadState.DECLINED: "declined",
    ThreadState.NEEDS_OPERATOR: "needs operator",
}


class PullState(StrEnum):
    DRAFT = "draft"  # delivered as a draft: the repository's tests were still red
    OPEN = "open"
    MERGED = "merged"
    CLOSED = "closed"  # closed without a merge


@dataclass(frozen=True)
class LedgerCounts:
    open: int = 0
    addressed: int = 0
    declined: int = 0
    needs_operator: int = 0

    @classmethod
    def of(cls, states: Iterable[str]) -> LedgerCounts:
        counted = {state: 0 for state in ThreadState}
        for state in states:
            if state in counted:
                counted[ThreadState(state)] += 1
        return cls(
            open=counted[ThreadState.OPEN],
            addressed=counted[ThreadState.ADDRESSED],
            declined=counted[ThreadState.DECLINED],
            needs_operator=counted[ThreadState.NEEDS_OPERATOR],
        )

    @property
    def total(self) -> int:
        return self.open + self.addressed + self.declined + self.needs_operator

    def words(self) -> str:
        """ "2 open · 3 addressed": the states that have threads, in the ledger's order;
        "" for a pull request nobody reviewed yet."""
        pairs = (
            (self.open, ThreadState.OPEN),
            (self.addressed, ThreadState.ADDRESSED),
            (self.declined, ThreadState.DECLINED),
            (self.needs_operator, ThreadState.NEEDS_OPERATOR),
        )
        return " · ".join(f"{count} {THREAD_WORDS[state]}" for count, state in pairs if count)


@dataclass(frozen=True)
class PullView:
    pr_state: PullState | None  # None: no pull request yet
    review: LedgerCounts
    ready_for_review: bool

    def as_json(self) -> dict[str, Any]:
        """The fields the task JSON and the `ledger` event carry (docs/api.md)."""
        return {
            "pr_state": None if self.pr_state is None else self.pr_state.value,
            "review": {
                "open": self.review.open,
                "addressed": self.review.addressed,
                "declined": self.review.declined,
                "needs_operator": self.review.needs_operator,
                "summary": self.review.words(),
            },
            "ready_for_review": self.ready_for_review,
        }


def pull_state(task: Task, *, draft: bool) -> PullState | None:
    """Merged and closed are the task's own final states; otherwise a recorded pull request
    is open, or a draft when it was delivered as one."""
    if task.state == TaskState.MERGED:
        return PullState.MERGED
    if task.state == TaskState.CLOSED:
        return PullState.CLOSED
    if not task.pr_url:
        return None
    return PullState.DRAFT if draft else PullState.OPEN


def view_of(task: Task, ledger: list[ReviewThread], *, draft: bool) -> PullView:
    return PullView(
        pr_state=pull_state(task, draft=draft),
        review=LedgerCounts.of(thread.state for thread in ledger),
        ready_for_review=ready_for_review(task, ledger),
    )


def views_of(session: Session, tasks: list[Task]) -> dict[int, PullView]:
    """Each task's view, in two queries whatever the number of tasks (the Board's)."""
    ids = [task.id for task in tasks]
    if not ids:
        return {}
    ledgers: dict[int, list[ReviewThread]] = {task_id: [] for task_id in ids}
    threads = session.scalars(
        select(ReviewThread)
        .options(defer(ReviewThread.text))  # the counts need the state, not the review text
        .where(ReviewThread.task_id.in_(ids))
        .order_by(ReviewThread.id)
    )
    for thread in threads:
        ledgers[thread.task_id].append(thread)
    drafts = _delivered_as_draft(session, ids)
    return {task.id: view_of(task, ledgers[task.id], draft=task.id in drafts) for task in tasks}


def _delivered_as_draft(session: Session, ids: list[int]) -> set[int]:
    """The tasks whose latest delivery opened a draft pull request (bot.lifecycle.finish
    records `draft` in the delivered event's data)."""
    rows = session.execute(
        select(TaskEvent.task_id, TaskEvent.data)
        .where(TaskEvent.task_id.in_(ids), TaskEvent.to_state == TaskState.DELIVERED)
        .order_by(TaskEvent.id)
    )
    latest: dict[int, bool] = {}
    for task_id, data in rows:
        latest[task_id] = bool((data or {}).get("draft"))
    return {task_id for task_id, draft in latest.items() if draft}
