"""Scrape-time figures of the task lifecycle: tasks by state, the queue's depth and the
requests coding runs were refused, read from the database and Redis so every instance
reports the same shared truth."""

from __future__ import annotations

import asyncio

import redis
from rq import Queue
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.db import Database
from bot.lifecycle import egress_blocked
from bot.lifecycle.context import DEFAULT_QUEUE
from bot.lifecycle.models import Task
from bot.lifecycle.states import TaskState
from bot.metrics import Collector, Metrics


def _counts(session: Session) -> dict[str, float]:
    rows = session.execute(select(Task.state, func.count()).group_by(Task.state))
    return {str(state): float(count) for state, count in rows}


def lifecycle_collector(
    db: Database, connection: redis.Redis, queue: str = DEFAULT_QUEUE
) -> Collector:
    async def lifecycle(metrics: Metrics) -> None:
        counts = await db.run(_counts)
        metrics.set_counts(metrics.tasks, counts, tuple(state.value for state in TaskState))
        metrics.egress_blocked.set(await db.run(egress_blocked.total))
        depth = await asyncio.to_thread(lambda: Queue(queue, connection=connection).count)
        metrics.queue_depth.set(depth)

    return lifecycle
