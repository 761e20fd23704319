"""A task that asked a question and got a Decision, written straight into the records: the
past Decisions `bot.lifecycle.decision_drafts` offers later questions are made of these."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from bot.lifecycle import tasks
from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply


def answered(
    session: Session,
    repo: str,
    issue: int,
    question: str,
    decision: str,
    at: datetime,
    *,
    title: str | None = None,
    comment_id: int | None = None,
) -> int:
    """The task of `repo#issue` (titled `title`, else the question) waits on `question`
    and has `decision` recorded (from comment `comment_id` when given); its id."""
    task = tasks.new_task(
        session,
        repo=repo,
        issue=issue,
        title=title or question,
        origin_session=None,
        actor="test",
        clock=lambda: at,
    )
    for state in (TaskState.RUNNING, TaskState.WAITING_FOR_INFO):
        data = {"question": question} if state == TaskState.WAITING_FOR_INFO else None
        apply(session, task.id, Move(state, actor="test", data=data), lambda: at)
    tasks.record(
        session,
        tasks.get_task(session, task.id),
        EventKind.DECISION,
        actor="maintainer",
        detail=decision,
        data=None if comment_id is None else {"comment_id": comment_id},
        clock=lambda: at,
    )
    return task.id
