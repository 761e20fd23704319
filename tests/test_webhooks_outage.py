"""Outages drop no work. A pickup label and a Decision delivered while GitHub's API answers
502 (for longer than several of their retries) fail their first attempts, are retried with
backoff, and both take effect once GitHub recovers (real Redis and RQ, SQLite and
PostgreSQL). A pickup while Redis is down is not a failed delivery: its task is stored, and
enqueued once Redis is back."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import func, select

from bot.github.retry import RetryPolicy as GitHubRetryPolicy
from bot.lifecycle.context import github_factory
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.queue import rq_queue
from bot.lifecycle.reconcile import run_reconcile
from bot.lifecycle.states import TaskState
from bot.lifecycle.worker import InProcessWorker
from steelframe.worker_context import build_worker_context
from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.fakes.coding import command
from tests.fakes.lifecycle import (
    DECISION,
    PATIENCE_SECONDS,
    PICKUP,
    Lifecycle,
    a_lease_later,
    start_lifecycle,
    wait_for,
)
from tests.fakes.ports import refused_port
from tests.fakes.sandbox import sandbox_settings
from webhooks.deliveries import DeliveryStatus, WebhookDelivery
from webhooks.delivery_retry import RetryPolicy
from webhooks.deps import WEBHOOKS

pytestmark = pytest.mark.slow  # waits out a GitHub or Redis outage for real

# Longer than the client's own retries and several of the delivery's (backoff 0.4, 0.8,
# 1.6, 1.6... s): the delivery's retries carry the work over it.
OUTAGE_SECONDS = 4.0
# Long enough that a heartbeat starved on a loaded machine does not lose a run's lease
# (with 1 s, CI lost one and the run stopped half-way); nothing here waits for one to expire.
LEASE_SECONDS = 15.0


def as_person(lc: Lifecycle, login: str, action: Callable[..., Any], *args: Any) -> None:
    """Act on github.com's side (its web UI keeps working while the API fails): the change
    and its webhook, without going through the faulted REST API."""
    world = lc.sandbox.sandbox
    repo, user = world.world.repo(lc.repo), world.world.user(login)
    outcome = action(world.ops, repo, user, *args)
    world.emit(outcome.hooks)


def count(lc: Lifecycle, *statuses: DeliveryStatus) -> int:
    """Deliveries in any of `statuses`, in one query: counted one status at a time, a
    delivery moving from one to the next between two queries (a retry claimed, retrying ->
    processing) would be missed by both."""
    return int(
        lc.ctx.db.call(
            lambda s: s.scalar(select(func.count()).where(WebhookDelivery.status.in_(statuses)))
        )
    )


def find_task(lc: Lifecycle, issue: int) -> Task | None:
    return lc.ctx.db.call(
        lambda s: s.scalar(select(Task).where(Task.repo == lc.repo, Task.issue == issue))
    )


async def test_a_pickup_and_a_decision_during_a_github_outage_take_effect_after_it(
    github_sandbox: GitHubSandbox,
    api_factory: Callable[..., Any],
    tmp_path: Path,
    redis_url: str,
    any_db_url: str,
) -> None:
    lc = await start_lifecycle(
        github_sandbox,
        api_factory,
        tmp_path,
        redis_url,
        coding_command=command("question"),
        database_url=any_db_url,
    )
    github_sandbox.user_token("maintainer", "write")
    # The client gives up within a second, so the outage outlasts its own retries and the
    # delivery's retries are what carries the work over it.
    assert lc.api.services.github is not None
    lc.api.services.github.transport.retry = GitHubRetryPolicy(max_attempts=2, base_delay=0.2)
    lc.api.raw.app[WEBHOOKS].processor.retry = RetryPolicy(
        max_attempts=20, base_delay=0.4, max_delay=1.6
    )

    waiting = await lc.open_issue("Add a cache")
    await lc.work()
    assert lc.task(waiting).state == TaskState.WAITING_FOR_INFO
    fresh = int((await lc.github.create_issue(lc.repo, title="Fix the docs", body="typo")).number)
    await lc.settle()
    assert find_task(lc, fresh) is None

    github_sandbox.fail("server_error", path="*", times=1_000_000)  # every API call: 502
    try:
        as_person(lc, "maintainer", type(lc.sandbox.sandbox.ops).add_labels, fresh, [PICKUP])
        decision = {"body": f"{DECISION}\nUse Redis."}
        as_person(lc, "maintainer", type(lc.sandbox.sandbox.ops).create_comment, waiting, decision)
        # Both failed (the author's access cannot be checked) and wait for their retry.
        await wait_for(lambda: count(lc, DeliveryStatus.RETRYING) >= 2, within=PATIENCE_SECONDS)
        await asyncio.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for a result
        assert find_task(lc, fresh) is None
        assert lc.task(waiting).state == TaskState.WAITING_FOR_INFO
    finally:
        github_sandbox.sandbox.faults.clear()

    unsettled = (DeliveryStatus.RECEIVED, DeliveryStatus.PROCESSING, DeliveryStatus.RETRYING)
    await wait_for(
        lambda: count(lc, *unsettled) == 0 and find_task(lc, fresh) is not None,
        within=90,
    )
    assert count(lc, DeliveryStatus.DEAD) == 0
    task = lc.task(waiting)
    events = [(e.kind, e.to_state, e.detail) for e in lc.events(task.id)]
    assert task.state == TaskState.RUNNING and task.pending_decision == "Use Redis.", events
    await lc.work()
    assert lc.task(waiting).state == TaskState.DELIVERED  # the Decision took effect
    picked = find_task(lc, fresh)
    assert picked is not None and picked.state == TaskState.WAITING_FOR_INFO  # and the pickup
    retried = lc.ctx.db.call(
        lambda s: list(s.scalars(select(WebhookDelivery).where(WebhookDelivery.attempts > 1)))
    )
    assert {(d.event, d.action) for d in retried} >= {
        ("issues", "labeled"),
        ("issue_comment", "created"),
    }
    assert all(d.status == DeliveryStatus.PROCESSED for d in retried)


async def test_a_pickup_while_redis_is_down_is_processed_and_its_task_delivered_later(
    github_sandbox: GitHubSandbox,
    api_factory: Callable[..., Any],
    tmp_path: Path,
    redis_url: str,
) -> None:
    down = f"redis://127.0.0.1:{refused_port()}/0"  # nothing listens there
    settings = github_sandbox.settings(
        tmp_path,
        redis_url=down,
        task_lease_seconds=LEASE_SECONDS,
        coding_command=command("commit"),
        **sandbox_settings(tmp_path),
    )
    api = await api_factory(settings)
    github_sandbox.deliver_to(str(api.raw.make_url("/api/github/webhooks")))
    github = github_sandbox.client()
    issue = await github.create_issue(
        SANDBOX_REPO, title="Make it blue", body="It is red.", labels=[PICKUP]
    )
    for _ in range(3):  # the App's own label writes send more webhooks
        await github_sandbox.settle()
        await asyncio.wait_for(api.raw.app[WEBHOOKS].processor.drain(), PATIENCE_SECONDS)
    db = api.services.db
    rows = db.call(lambda s: list(s.scalars(select(WebhookDelivery))))
    # opened, labeled (the pickup), then labeled again by the App ("queued")...
    pickups = [r for r in rows if (r.event, r.action) == ("issues", "labeled")]
    assert pickups
    # ...none failed, none retrying: the pickup did its part (the task is stored).
    assert {r.status for r in rows} == {DeliveryStatus.PROCESSED}
    task = db.call(lambda s: s.scalar(select(Task).where(Task.issue == issue.number)))
    assert task is not None and task.state == TaskState.QUEUED

    # Redis is back: the reconciler enqueues the queued task that has no job; a worker runs it.
    back = github_sandbox.settings(
        tmp_path,
        redis_url=redis_url,
        task_lease_seconds=LEASE_SECONDS,
        coding_command=command("commit"),
        **sandbox_settings(tmp_path),
    )
    connection = redis.Redis.from_url(redis_url)
    ctx = build_worker_context(
        back, environ=os.environ, db=db, connection=connection, github=github_factory(back)
    )
    try:
        await wait_for(
            lambda: task.id in run_reconcile(a_lease_later(ctx), say=lambda line: None).requeued,
            within=PATIENCE_SECONDS,
        )
        worker = InProcessWorker(
            [rq_queue(ctx.queue_name, connection)], connection=connection, lifecycle=ctx
        )
        await asyncio.to_thread(worker.work, burst=True)
        state = db.call(lambda s: s.get(Task, task.id).state)
        assert state == TaskState.DELIVERED
    finally:
        connection.close()


async def test_terminate_while_redis_is_down_stops_the_task(
    github_sandbox: GitHubSandbox, api_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """The queued job cannot be cancelled without Redis; the task's state is what stops it."""
    down = f"redis://127.0.0.1:{refused_port()}/0"  # nothing listens there
    settings = github_sandbox.settings(tmp_path, redis_url=down, **sandbox_settings(tmp_path))
    api = await api_factory(settings)
    issue = await github_sandbox.client().create_issue(
        SANDBOX_REPO, title="Make it blue", body="It is red."
    )
    picked = await api.services.lifecycle.pickups.pickup(
        SANDBOX_REPO, issue.number, title="Make it blue", cause="test"
    )
    response = await api.post(f"/api/operator/tasks/{picked.task_id}/terminate")
    assert response.status == 200, await response.text()
    assert (await response.json())["state"] == TaskState.TERMINATED


async def test_a_decision_while_redis_is_down_resumes_the_task_without_counting_a_failure(
    github_sandbox: GitHubSandbox,
    api_factory: Callable[..., Any],
    tmp_path: Path,
    redis_url: str,
) -> None:
    lc = await start_lifecycle(
        github_sandbox,
        api_factory,
        tmp_path,
        redis_url,
        coding_command=command("question"),
    )
    waiting = await lc.open_issue("Add a cache")
    await lc.work()
    task = lc.task(waiting)
    assert task.state == TaskState.WAITING_FOR_INFO
    github_sandbox.user_token("maintainer", "write")

    # The instance that receives the Decision has lost Redis (same database).
    down = f"redis://127.0.0.1:{refused_port()}/0"  # nothing listens there
    cut_off = await api_factory(replace(lc.settings, redis_url=down))
    github_sandbox.deliver_to(str(cut_off.raw.make_url("/api/github/webhooks")))
    decision = {"body": f"{DECISION}\nUse Redis."}
    as_person(lc, "maintainer", type(lc.sandbox.sandbox.ops).create_comment, waiting, decision)
    await github_sandbox.settle()
    await asyncio.wait_for(cut_off.raw.app[WEBHOOKS].processor.drain(), PATIENCE_SECONDS)
    # The Decision's delivery did its part: nothing waits for a retry.
    assert count(lc, DeliveryStatus.RETRYING) == count(lc, DeliveryStatus.DEAD) == 0
    resumed = lc.task(waiting)
    assert resumed.state == TaskState.RUNNING and resumed.pending_decision == "Use Redis."

    # Redis is back: the reconciler gives the resumed task its continuation, not a retry.
    later = a_lease_later(lc.ctx)
    await wait_for(lambda: task.id in run_reconcile(later, say=print).requeued, within=60)
    github_sandbox.deliver_to(str(lc.api.raw.make_url("/api/github/webhooks")))
    await lc.work()
    assert lc.task(waiting).state == TaskState.DELIVERED
    kinds = [event.kind for event in lc.events(task.id)]
    assert EventKind.RETRY_SCHEDULED not in kinds and lc.task(waiting).attempts <= 1
