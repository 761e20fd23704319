"""Resume: a Decision (from the App or a writer) moves a waiting task back to running.

Anything else (an older Decision, one for a task that is not waiting, one from someone
without write access) is recorded on the task and ignored. The resume commits through
`transition`; the continuation is enqueued after the commit (the reconciler enqueues it if
Redis was away), then labels and the sticky comment follow.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import redis
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.decisions import DECISION_MARKER, decision_text
from bot.handler_runs import record_done
from bot.lifecycle import base_decision, ci_decision, plan_store, tasks
from bot.lifecycle.access import may_act
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.progress import Phase
from bot.lifecycle.queue import LifecycleQueue, job_id
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import IllegalTransition, TaskState
from bot.lifecycle.transition import Move, Transitioned, transition
from bot.markers import opens_as_status

log = logging.getLogger(__name__)
# Why an empty Decision on a waiting plan changes nothing (docs/lifecycle.md, "Plan-first").
EMPTY_ON_PLAN = (
    "the Decision is empty: the plan still waits; publish `go ahead` to approve it, "
    "`reject` to end the task, or the edited plan"
)


@dataclass(frozen=True)
class CommentEvent:
    """An `issue_comment` webhook event as the lifecycle reads it (webhooks.lifecycle_hooks
    parses the payload): what happened, on which issue, which comment, by whom, its text."""

    action: str
    repo: str
    issue: int
    comment_id: int
    author: str
    body: str


@dataclass(frozen=True)
class ResumeResult:
    task_id: int | None
    resumed: bool
    reason: str


@dataclass(frozen=True, kw_only=True)
class Resumes:
    """Decisions from webhooks (built once by the composition root)."""

    db: Database
    queue: LifecycleQueue
    github: GitHubApi | None
    clock: Clock = utcnow

    async def on_comment_event(self, event: CommentEvent) -> ResumeResult | None:
        """`issue_comment` created with the Decision marker resumes a waiting task."""
        if event.action != "created":
            return None
        if DECISION_MARKER not in event.body:
            return None
        if await self._own_status_comment(event):
            return None  # Steelframe's own status comments are never Decisions
        return await self.resume(
            event.repo,
            event.issue,
            comment_id=event.comment_id,
            author=event.author,
            body=event.body,
            cause="webhook:issue_comment.created",
        )

    async def _own_status_comment(self, event: CommentEvent) -> bool:
        """Whether the comment is the App's progress comment or a notice (which may quote the
        Decision marker): laid out as one, and written by the App. A Decision that quotes a
        status marker is still a Decision, and a stranger's comment laid out as a notice is
        theirs, refused as their Decision is (`_refusal`): a marked comment counts as
        Steelframe's only when the App wrote it (docs/lifecycle.md)."""
        if not opens_as_status(event.body) or self.github is None:
            return False
        return await self.github.is_app_login(event.author)

    async def resume(
        self, repo: str, issue: int, *, comment_id: int, author: str, body: str, cause: str
    ) -> ResumeResult:
        """Resume a waiting task with a Decision written by the App or a user with write
        access; anything else is recorded on the task and ignored."""
        task = await self.db.run(lambda s: tasks.find_task(s, repo, issue))
        if task is None:
            return ResumeResult(None, False, "no task for this issue")
        decision = decision_text(body)
        refused = await self._refusal(task, repo, author, comment_id, decision)
        if refused is not None:
            return refused
        job = job_id(task.id, task.generation, f"d{comment_id}")
        move = _resumed(cause, author, comment_id, decision, job)

        def decided(session: Session, moved: Transitioned) -> None:
            tasks.record(
                session,
                tasks.get_task(session, moved.task_id),
                EventKind.DECISION,
                actor=author,
                detail=decision[:500],
                data={"comment_id": comment_id},
                clock=self.clock,
            )
            # A task failing CI stopped: the Decision starts one more fix run, guided by it.
            ci_decision.one_more_fix_run(
                session, moved.task_id, job=job, author=author, clock=self.clock
            )
            # A task whose conflict with its base stopped: one more update run, guided by it.
            base_decision.one_more_update_run(
                session, moved.task_id, job=job, author=author, clock=self.clock
            )
            record_done(session)

        async def continued(moved: Transitioned) -> None:
            await self._continue(moved.task_id, job, repo, issue, author)

        try:
            await transition(
                self.db,
                self.github,
                task.id,
                move,
                clock=self.clock,
                create_progress=False,
                within=decided,
                after_commit=continued,
            )
        except IllegalTransition as exc:
            return ResumeResult(task.id, False, f"task is {exc.current}")
        return ResumeResult(task.id, True, "resumed")

    async def _refusal(
        self, task: Task, repo: str, author: str, comment_id: int, decision: str
    ) -> ResumeResult | None:
        """Why this Decision does not resume the task (recorded on it), or None."""
        if task.decision_comment_id == comment_id:
            return ResumeResult(task.id, False, "this Decision was already applied")
        # Comment ids grow with time: a smaller one is older than the Decision applied last
        # (a replayed delivery, or one GitHub sent late), and never overrides it.
        if task.decision_comment_id is not None and comment_id < task.decision_comment_id:
            return await self._decision_ignored(
                task, author, comment_id, "a newer Decision was already applied"
            )
        if task.state != TaskState.WAITING_FOR_INFO:
            return await self._decision_ignored(task, author, comment_id, f"task is {task.state}")
        allowed, why = await self._may_decide(repo, author)
        if not allowed:
            return await self._decision_ignored(task, author, comment_id, why)
        # Only the marker, no words: neither an approval, nor a rejection, nor an edited plan
        # (it would start the plan run again). The plan keeps waiting; the event says why.
        if not decision.strip() and await self.db.run(plan_store.waits_on_plan, task.id):
            return await self._decision_ignored(task, author, comment_id, EMPTY_ON_PLAN)
        return None

    async def _continue(self, task_id: int, job: str, repo: str, issue: int, author: str) -> None:
        """The committed resume's continuation enqueued, and its needs_human label gone."""
        try:
            await asyncio.to_thread(self.queue.enqueue, task_id, job=job, continuation=True)
        except redis.RedisError as exc:
            # The resume is committed: the reconciler enqueues the continuation of a resumed
            # task that has no job once Redis is back (not a failed run, no attempt spent).
            log.warning(
                "lifecycle: task %s resumed, continuation not yet enqueued (%s); the "
                "reconciler will",
                task_id,
                type(exc).__name__,
            )
        log.info("lifecycle: task %s resumed by a Decision from %s", task_id, author)
        if self.github is not None:
            try:
                await self.github.remove_label(repo, issue, "steelframe:needs_human")
            except Exception as exc:
                log.warning("lifecycle: task %s needs_human not removed: %s", task_id, exc)

    async def _may_decide(self, repo: str, author: str) -> tuple[bool, str]:
        return await self._may_act(repo, author, "a Decision")

    async def _may_act(self, repo: str, login: str, what: str) -> tuple[bool, str]:
        return await may_act(self.github, repo, login, what)

    async def _decision_ignored(
        self, task: Task, author: str, comment_id: int, why: str
    ) -> ResumeResult:
        def note(session: Session) -> None:
            tasks.record(
                session,
                tasks.get_task(session, task.id),
                EventKind.DECISION_IGNORED,
                actor=author or "unknown",
                detail=why,
                data={"comment_id": comment_id},
                clock=self.clock,
            )
            record_done(session)

        await self.db.run(note)
        log.info("lifecycle: task %s Decision comment %s ignored: %s", task.id, comment_id, why)
        return ResumeResult(task.id, False, why)


def _resumed(cause: str, author: str, comment_id: int, decision: str, job: str) -> Move:
    """The move a Decision makes: back to running, the Decision pending for the next run."""
    return Move(
        TaskState.RUNNING,
        actor=f"{cause}:{author}",
        detail=f"resumed by a Decision from {author}",
        data={"comment_id": comment_id, "author": author},
        expect=[TaskState.WAITING_FOR_INFO],
        changes={
            "pending_decision": decision,
            "decision_comment_id": comment_id,
            "attempts": 0,
            "job_id": job,
        },
        phase=Phase.RUNNING,
        note="Resumed by a Decision.",
    )
