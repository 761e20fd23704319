"""`TaskService`: the lifecycle's entry for the web service (no HTTP here), composed of
one part per noun: `Pickups` (bot.lifecycle.pickup), `Resumes` (resume), `Terminations`
(terminate) and the board's views (board). It holds no logic of its own: a feature adds a
module and, if the shells need it, one line here.
"""

from __future__ import annotations

from typing import Any

from bot.clock import Clock, utcnow
from bot.contracts.tasks import TaskDetail
from bot.db import Database
from bot.lifecycle import board
from bot.lifecycle.context import DEFAULT_QUEUE
from bot.lifecycle.pickup import IssueEvent, PickupResult, Pickups
from bot.lifecycle.queue import LifecycleQueue
from bot.lifecycle.resume import CommentEvent, ResumeResult, Resumes
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.terminate import Termination, Terminations


class TaskService:
    def __init__(
        self,
        *,
        db: Database,
        queue: LifecycleQueue,
        github: GitHubApi | None,
        pickup_labels: tuple[str, ...],
        clock: Clock = utcnow,
    ) -> None:
        self.db = db
        self.queue = queue  # review and CI webhooks queue runs (review_pickup, ci_intake)
        self.github = github
        self.clock = clock
        self.pickups = Pickups(
            db=db, queue=queue, github=github, pickup_labels=pickup_labels, clock=clock
        )
        self.resumes = Resumes(db=db, queue=queue, github=github, clock=clock)
        self.terminations = Terminations(db=db, queue=queue, github=github, clock=clock)

    async def pickup(
        self,
        repo: str,
        issue: int,
        *,
        title: str,
        body: str | None = None,
        origin_session: str | None = None,
        cause: str,
    ) -> PickupResult:
        return await self.pickups.pickup(
            repo, issue, title=title, body=body, origin_session=origin_session, cause=cause
        )

    async def on_issue_event(self, event: IssueEvent) -> PickupResult | None:
        return await self.pickups.on_issue_event(event)

    async def on_comment_event(self, event: CommentEvent) -> ResumeResult | None:
        return await self.resumes.on_comment_event(event)

    async def terminate(self, task_id: int, *, actor: str) -> Termination:
        return await self.terminations.terminate(task_id, actor=actor)

    async def archive(self, task_id: int, *, actor: str) -> TaskDetail:
        return await board.archive(self.db, task_id, actor=actor, clock=self.clock)


def build_task_service(
    *,
    db: Database,
    connection: Any,
    github: GitHubApi | None,
    pickup_labels: tuple[str, ...],
    time_limit: float,
    queue_name: str = DEFAULT_QUEUE,
    clock: Clock = utcnow,
) -> TaskService:
    return TaskService(
        db=db,
        queue=LifecycleQueue(connection, name=queue_name, time_limit=time_limit),
        github=github,
        pickup_labels=pickup_labels,
        clock=clock,
    )
