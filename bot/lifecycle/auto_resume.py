"""Auto-resume from a past Decision (issue 34; docs/lifecycle.md, "Answers drafted from past
Decisions"), only where the repository opts in (`decisions.auto_resume` in its
`.steelframe/config.yml`; never by default).

When a run's question is at least `decisions.min_score` alike to one a standing Decision of
the same repository answered (bot.lifecycle.decision_drafts: a reversed Decision is never
offered), Steelframe publishes that Decision on the issue through the Decision publisher, saying
which Decision it reused (issue and date); the task resumes as with any Decision (the
App's Decision comment, through the webhook). The question's own text never triggers
anything by itself: the repository's committed config allows it, and the answer is one a
person published before. Once per question: the publish is keyed by the task's
`waiting_for_info` event, so a redelivered or repeated call posts nothing new. A call for a
question already answered under its key answers with that comment before choosing again:
the Decision it would choose now may differ (another came to stand meanwhile), and a key
names one Decision (another under it is a 422, `bot.idempotency.KeyReused`), but the
question has its answer. When an earlier publish under the key chose another Decision and
has not finished (it runs elsewhere, or stopped before it knew whether GitHub took the
comment), nothing is published either, and the log says so: the task waits for that
Decision or for a person, never for two.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.decisions import SIGNATURE_MARKER, CommentApi, DecisionPublisher, Published
from bot.idempotency import KeyReused
from bot.lifecycle import decision_drafts
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.decision_drafts import Offered
from bot.lifecycle.models import Task, TaskEvent
from bot.lifecycle.repo_config import CONFIG_PATH, Decisions
from bot.lifecycle.states import TaskState

log = logging.getLogger(__name__)

# No operator publishes it: the publish key's operator part (no operator has id 0, so the
# comment carries no operator's signature).
NO_OPERATOR = 0


@dataclass(frozen=True)
class Question:
    """The question a task waits on: the event that asked it, and its text."""

    task_id: int
    repo: str
    issue: int
    event_id: int
    text: str


def waiting_question(session: Session, task_id: int) -> Question | None:
    """The question `task_id` waits on now, or None (it is not waiting)."""
    task = session.get(Task, task_id)
    if task is None or task.state != TaskState.WAITING_FOR_INFO:
        return None
    event = session.scalar(
        select(TaskEvent)
        .where(TaskEvent.task_id == task_id, TaskEvent.to_state == TaskState.WAITING_FOR_INFO)
        .order_by(TaskEvent.id.desc())
    )
    text = str((event.data or {}).get("question") or "") if event is not None else ""
    if event is None or not text.strip():
        return None
    return Question(task.id, task.repo, task.issue, event.id, text)


def choice(session: Session, question: Question, min_score: float) -> Offered | None:
    """The standing Decision to reuse for `question`: the best offered, if alike enough."""
    offers = decision_drafts.offered(
        session, question.repo, question.text, task_id=question.task_id
    )
    if not offers or offers[0].score < min_score:
        return None
    return offers[0]


def comment(best: Offered, min_score: float) -> str:
    """The reused Decision's words, then (after the signature marker, so not part of the
    Decision the run is told, and the same answer is not taken for a reversal) which
    Decision it reused and why it was published without an operator."""
    return (
        f"{best.past.decision}\n\n{SIGNATURE_MARKER}\n"
        f"— reused by Steelframe from the Decision published on {best.past.cite()}, which "
        f"answered a question {best.score:.2f} alike; this repository allows auto-resume "
        f"(`decisions.auto_resume` in `{CONFIG_PATH}`) from {min_score:.2f}"
    )


def answer_key(question: Question) -> str:
    """The Idempotency-Key of `question`'s answer: one per question asked."""
    return f"auto-resume:{question.task_id}:{question.event_id}"


async def reuse(
    ctx: LifecycleContext, github: CommentApi, question: Question, policy: Decisions
) -> Published | None:
    """Publish the reused Decision for `question` (once per question: an answer published
    under its key already is the answer), or None."""
    publisher = DecisionPublisher(db=ctx.db, github=github, clock=ctx.clock)
    key = answer_key(question)
    where = (question.repo, question.issue)
    earlier = await publisher.published(*where, operator_id=NO_OPERATOR, request_key=key)
    if earlier is not None:
        log.info(
            "lifecycle: task %s question already answered by auto-resume (%s); nothing more "
            "to publish",
            question.task_id,
            earlier.comment_url,
        )
        return earlier
    best = await ctx.db.run(choice, question, policy.min_score)
    if best is None:
        return None
    said = comment(best, policy.min_score)
    try:
        published = await publisher.publish(*where, said, operator_id=NO_OPERATOR, request_key=key)
    except KeyReused:
        log.info(
            "lifecycle: task %s question already taken by an auto-resume that chose another "
            "Decision and has not finished; no second Decision is published",
            question.task_id,
        )
        return None
    log.info(
        "lifecycle: task %s question answered by reusing the Decision of #%s (score %.2f)",
        question.task_id,
        best.past.issue,
        best.score,
    )
    return published


async def after_question(
    ctx: LifecycleContext, github: CommentApi, task_id: int, policy: Decisions | None
) -> None:
    """The hook after a run asked its question: reuse a Decision where allowed. A failure
    leaves the task waiting for a person, as without auto-resume."""
    if policy is None or not policy.auto_resume:
        return
    try:
        question = await ctx.db.run(waiting_question, task_id)
        if question is not None:
            await reuse(ctx, github, question, policy)
    except Exception:
        log.exception("lifecycle: task %s auto-resume failed; it waits for a Decision", task_id)
