"""Reading the review thread ledger (`review_threads`): a task's threads as its JSON shows
them, and whether the task is ready for review. bot.lifecycle.reviews writes it."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.lifecycle.models import ReviewThread, Task, ThreadState
from bot.lifecycle.states import TaskState

EXCERPT_CHARS = 160


def review_threads(session: Session, task_id: int) -> list[ReviewThread]:
    return list(
        session.scalars(
            select(ReviewThread).where(ReviewThread.task_id == task_id).order_by(ReviewThread.id)
        )
    )


def ready_for_review(task: Task, ledger: list[ReviewThread]) -> bool:
    """Delivered with no thread left open: a reviewer's turn, not Steelframe's."""
    return task.state == TaskState.DELIVERED and not any(
        thread.state == ThreadState.OPEN for thread in ledger
    )


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of a review's text on one line (untrusted: shown as text, never markup)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
