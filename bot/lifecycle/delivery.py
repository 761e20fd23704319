"""Task results to the chat session that filed the task: one assistant message, once.

Spec reference: background results reach the originating chat exactly once. The message
and its delivery marker commit in one transaction; the message id is derived from the
task event that produced the result, so a second delivery of the same result collides on
the primary key and writes nothing.
"""

from __future__ import annotations

import logging

from sqlalchemy import func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.contracts.turn_meta import TurnMeta
from bot.db import Database
from bot.lifecycle.models import ChatDelivery, EventKind, Task, TaskEvent
from bot.lifecycle.states import CHAT_RESULTS, TaskState
from bot.models import ChatSession, ChatTurn, Role

log = logging.getLogger(__name__)
RESULT_INTENT = "status"
RACE_ROUNDS = 5


def message_id(task_id: int, event_id: int) -> str:
    return f"task-{task_id}-e{event_id}"


def result_text(task: Task, event: TaskEvent) -> str:
    data = event.data or {}
    where = f"{task.repo}#{task.issue}"
    if event.to_state == TaskState.DELIVERED:
        text = f"Task {task.id} for {where} was delivered: pull request {data.get('pr_url', '')}."
        if data.get("summary"):
            text += f"\n\n{data['summary']}"
        return text
    if event.to_state == TaskState.WAITING_FOR_INFO:
        question = str(data.get("question") or "").strip()
        quoted = "\n".join(f"> {line}" for line in question.splitlines()) or "> (no question)"
        return (
            f"Task {task.id} for {where} needs information before it can go on:\n\n{quoted}\n\n"
            f"Publish a Decision on #{task.issue} to resume it."
        )
    return f"Task {task.id} for {where} failed: {data.get('error') or event.detail}"


# The transitions a chat session hears of: a result, but not a pull request's reopen putting
# the task back as it was before its close (that result was reported when it happened).
# `posts_result` is the same rule for one event in hand; keep the two together.
_RESULTS = (
    TaskEvent.kind == EventKind.TRANSITION,
    TaskEvent.to_state.in_([s.value for s in CHAT_RESULTS]),
    or_(TaskEvent.from_state.is_(None), TaskEvent.from_state != TaskState.CLOSED.value),
)


def posts_result(event: TaskEvent) -> bool:
    """Whether this event is a result its task's chat session hears of (as `_RESULTS`)."""
    return (
        event.kind == EventKind.TRANSITION
        and event.to_state in {s.value for s in CHAT_RESULTS}
        and event.from_state != TaskState.CLOSED.value
    )


def _undelivered(session: Session, task_id: int) -> list[int]:
    delivered = select(ChatDelivery.event_id).where(ChatDelivery.task_id == task_id)
    return list(
        session.scalars(
            select(TaskEvent.id)
            .where(
                TaskEvent.task_id == task_id,
                *_RESULTS,
                TaskEvent.id.not_in(delivered),
            )
            .order_by(TaskEvent.id)
        )
    )


def _deliver_one(session: Session, task_id: int, event_id: int, clock: Clock) -> str | None:
    """Message and marker in this one transaction; None when there is nothing to write."""
    task = session.get(Task, task_id)
    event = session.get(TaskEvent, event_id)
    if task is None or event is None or task.origin_session is None:
        return None
    ident = message_id(task_id, event_id)
    if session.get(ChatDelivery, ident) is not None:
        return None
    now = clock()
    chat = session.get(ChatSession, task.origin_session, with_for_update=True)
    outcome = "skipped"
    if chat is not None:
        seq = session.scalar(select(func.max(ChatTurn.seq)).where(ChatTurn.session_id == chat.id))
        meta: TurnMeta = {
            "kind": "task_result",
            "task_id": task_id,
            "repo": task.repo,
            "issue": task.issue,
            "state": event.to_state,
            "pr_url": (event.data or {}).get("pr_url"),
            "event_id": event_id,
        }
        session.add(
            ChatTurn(
                id=ident,
                session_id=chat.id,
                seq=(seq or 0) + 1,
                role=Role.ASSISTANT,
                content=result_text(task, event),
                intent=RESULT_INTENT,
                meta=meta,
                created_at=now,
            )
        )
        chat.last_activity_at = now
        outcome = "delivered"
    session.add(
        ChatDelivery(
            id=ident,
            task_id=task_id,
            event_id=event_id,
            session_id=task.origin_session,
            state=str(event.to_state),
            outcome=outcome,
            at=now,
        )
    )
    session.flush()
    return ident if outcome == "delivered" else None


def deliver_pending(db: Database, task_id: int, *, clock: Clock = utcnow) -> list[str]:
    """Deliver every result of the task not yet delivered; safe to call from anywhere."""
    if db.call(lambda s: (t := s.get(Task, task_id)) is None or t.origin_session is None):
        return []
    sent: list[str] = []
    for event_id in db.call(_undelivered, task_id):
        ident = _deliver_with_retry(db, task_id, event_id, clock)
        if ident is not None:
            sent.append(ident)
            log.info("delivery: task %s result %s to its chat session", task_id, ident)
    return sent


def _deliver_with_retry(db: Database, task_id: int, event_id: int, clock: Clock) -> str | None:
    for _ in range(RACE_ROUNDS):
        try:
            return db.call(_deliver_one, task_id, event_id, clock)
        except IntegrityError:
            # Another deliverer wrote the marker (the next round sees it and stops), or a
            # chat turn took our seq (the next round takes the next one).
            continue
    log.warning("delivery: task %s event %s kept racing; the reconciler retries", task_id, event_id)
    return None


def _with_pending(session: Session) -> list[int]:
    delivered = select(ChatDelivery.event_id)
    return list(
        session.scalars(
            select(TaskEvent.task_id)
            .join(Task, Task.id == TaskEvent.task_id)
            .where(
                Task.origin_session.is_not(None),
                *_RESULTS,
                TaskEvent.id.not_in(delivered),
            )
            .distinct()
        )
    )


def deliver_all_pending(db: Database, *, clock: Clock = utcnow) -> int:
    """The reconciler's sweep: results a crash left undelivered."""
    return sum(len(deliver_pending(db, task_id, clock=clock)) for task_id in db.call(_with_pending))
