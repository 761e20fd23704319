"""Answers drafted from past Decisions (issue 34; docs/lifecycle.md, "Answers drafted from
past Decisions").

When a task asks a question, the published Decisions of the same repository that answered
a similar question are recalled: each Decision with the question it answered (the
question the task was waiting on when the Decision resumed it), ranked by the likeness of
the two questions (memory's analyser: stop words dropped, stemmed; tf-idf cosine over the
repository's questions), at most three, each cited with its issue and date. The best one
is offered as a draft for the operator to edit and publish: nothing here publishes. A
Decision answered again later by a different Decision (the same question, another
answer) was reversed, and is never offered. A Decision that settled a plan (approved it,
edited it or rejected it: plan_store) answered that plan only, and is never offered either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot import text_likeness
from bot.lifecycle.models import EventKind, Task, TaskEvent
from bot.lifecycle.plan_store import PlanStatus, TaskPlan
from bot.lifecycle.states import TaskState

MAX_OFFERED = 3
# A past question at least this alike is offered; one this alike to a later one with a
# different answer is the same question, answered again (the earlier answer reversed).
OFFER_FLOOR = 0.35
SAME_QUESTION = 0.8
# The repository's most recent Decisions looked at.
WINDOW = 500


@dataclass(frozen=True)
class PastDecision:
    repo: str
    issue: int
    task_id: int
    question: str
    decision: str
    at: datetime

    def cite(self) -> str:
        return f"#{self.issue} ({self.at:%Y-%m-%d})"


@dataclass(frozen=True)
class Offered:
    past: PastDecision
    score: float


def _plan_settlers(session: Session, repo: str) -> set[tuple[int, int]]:
    """(task, Decision comment) of every Decision that settled a plan of `repo`: its "go
    ahead", edited plan or "reject" answered that plan alone, never a later question."""
    rows = session.execute(
        select(TaskPlan.task_id, TaskPlan.decision_comment_id)
        .join(Task, Task.id == TaskPlan.task_id)
        .where(
            Task.repo == repo,
            TaskPlan.status != PlanStatus.PROPOSED,
            TaskPlan.decision_comment_id.is_not(None),
        )
    ).all()
    return {(task_id, comment_id) for task_id, comment_id in rows if comment_id is not None}


def past_decisions(session: Session, repo: str) -> list[PastDecision]:
    """The repository's Decisions with the question each answered, oldest first; the
    Decisions that settled a plan left out."""
    rows = session.execute(
        select(TaskEvent, Task.issue)
        .join(Task, Task.id == TaskEvent.task_id)
        .where(
            Task.repo == repo,
            (TaskEvent.kind == EventKind.DECISION)
            | (TaskEvent.to_state == TaskState.WAITING_FOR_INFO),
        )
        .order_by(TaskEvent.id.desc())
        .limit(WINDOW * 2)
    ).all()
    settlers = _plan_settlers(session, repo)
    asked: dict[int, str] = {}  # the question each task waits on, as the events go by
    found = []
    for event, issue in reversed(rows):
        if event.to_state == TaskState.WAITING_FOR_INFO:
            asked[event.task_id] = str((event.data or {}).get("question") or "")
        elif event.kind == EventKind.DECISION and (event.task_id, _comment(event)) in settlers:
            continue
        elif event.kind == EventKind.DECISION and asked.get(event.task_id):
            found.append(
                PastDecision(
                    repo, issue, event.task_id, asked[event.task_id], event.detail, event.at
                )
            )
    return found


def _comment(event: TaskEvent) -> int | None:
    said = (event.data or {}).get("comment_id")
    return said if isinstance(said, int) else None


# How a draft cites the Decision it reuses: published as is, it repeats that answer.
_REUSING = "\n\n(Reusing the Decision published on "


def _answer(decision: str) -> str:
    """A Decision's answer, without a draft's citation of the Decision it reused."""
    return decision.split(_REUSING, 1)[0].strip()


def _standing(past: list[PastDecision], vectors: list[text_likeness.Vector]) -> list[int]:
    """Indexes of the Decisions not reversed: none later answers the same question
    differently."""
    kept = []
    for i, decision in enumerate(past):
        later = range(i + 1, len(past))
        if not any(
            text_likeness.cosine(vectors[i], vectors[j]) >= SAME_QUESTION
            and _answer(past[j].decision) != _answer(decision.decision)
            for j in later
        ):
            kept.append(i)
    return kept


def offered(session: Session, repo: str, question: str, *, task_id: int) -> list[Offered]:
    """The standing Decisions of `repo` (other tasks') that answered a question like
    `question`, best first, at most three."""
    past = past_decisions(session, repo)
    if not past or not question.strip():
        return []
    vectors = text_likeness.vectors([*(p.question for p in past), question])
    asked = vectors[-1]
    matches = [
        Offered(past[i], text_likeness.cosine(vectors[i], asked))
        for i in _standing(past, vectors[:-1])
        if past[i].task_id != task_id
    ]
    matches = [m for m in matches if m.score >= OFFER_FLOOR]
    matches.sort(key=lambda m: m.score, reverse=True)
    return matches[:MAX_OFFERED]


def draft(matches: Sequence[Offered]) -> str | None:
    """The best match's Decision as a draft, citing where it comes from; None without one."""
    if not matches:
        return None
    best = matches[0].past
    return (
        f"{best.decision}{_REUSING}{best.cite()}, which answered: "
        f'"{" ".join(best.question.split())[:300]}")'
    )
