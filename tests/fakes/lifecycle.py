"""A lifecycle test bench: the real service with the GitHub sandbox (webhooks both ways),
real Redis and RQ, and an in-process worker run on demand in a thread."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.clock import utcnow
from bot.config import Settings
from bot.contracts.tasks import TaskDetail
from bot.lifecycle import board
from bot.lifecycle.context import DEFAULT_QUEUE, LifecycleContext, github_factory
from bot.lifecycle.models import EventKind, Task, TaskEvent
from bot.lifecycle.pickup import Pickups
from bot.lifecycle.queue import LifecycleQueue, rq_queue
from bot.lifecycle.resume import Resumes
from bot.lifecycle.terminate import Terminations
from bot.lifecycle.worker import InProcessWorker
from steelframe.parts import TaskLifecycle
from steelframe.worker_context import build_worker_context
from tests.conftest import ApiClient, GitHubSandbox
from tests.fakes.loop_statements import statements_on_the_loop
from tests.fakes.patience import PATIENCE_SECONDS as PATIENCE_SECONDS  # tests import it here
from tests.fakes.patience import wait_for as wait_for  # tests import it here too
from tests.fakes.sandbox import exchange_dir, sandbox_settings
from webhooks.deps import WEBHOOKS

PICKUP = "steelframe:work-on-this"
DECISION = "<!-- steelframe-decision -->"
# Whose statements must never run on an event loop: a run's loop carries its heartbeat, its
# termination watch and its GitHub calls, the service's its webhooks and streams.
LIFECYCLE = "bot/lifecycle/"


class Lifecycle:
    """One test's bench. Every statement bot/lifecycle/ runs while it lives, on the worker's
    runs' loops and on the service's (this test's) loop alike, is held to the rule that none
    runs on a thread with a running event loop (`tests/fakes/loop_statements.py`; what the
    test itself calls synchronously on its loop is not counted): each `work()` fails its
    test on one, and the `make` fixture on any left at the test's end."""

    def __init__(
        self, sandbox: GitHubSandbox, api: ApiClient, settings: Settings, ctx: LifecycleContext
    ) -> None:
        self.sandbox = sandbox
        self.api = api
        self.settings = settings
        self.ctx = ctx
        self._watch = contextlib.ExitStack()
        self._on_the_loop = self._watch.enter_context(
            statements_on_the_loop(ctx.db.engine, LIFECYCLE)
        )
        self.repo = sandbox.repo
        self.github = sandbox.client()
        # Where scripted runtimes may write (pid files, markers): the sandbox hides the rest.
        self.exchange = exchange_dir(settings.data_dir.parent)

    @property
    def lifecycle(self) -> TaskLifecycle:
        """The service's lifecycle parts, as the composition root built them."""
        assert self.api.services.lifecycle is not None
        return self.api.services.lifecycle

    @property
    def pickups(self) -> Pickups:
        return self.lifecycle.pickups

    @property
    def resumes(self) -> Resumes:
        return self.lifecycle.resumes

    @property
    def terminations(self) -> Terminations:
        return self.lifecycle.terminations

    @property
    def queue(self) -> LifecycleQueue:
        return self.lifecycle.queue

    async def archive(self, task_id: int, *, actor: str) -> TaskDetail:
        """What the Board's archive does (operator_api.board_routes)."""
        return await board.archive(self.ctx.db, task_id, actor=actor)

    async def settle(self, *, retries_within: float | None = None) -> None:
        """Every webhook the sandbox sent has been delivered and processed, retries too
        (those due within `retries_within` seconds: `DeliveryProcessor.drain`)."""
        for _ in range(3):
            await asyncio.wait_for(self.sandbox.sandbox.hooks.settle(), PATIENCE_SECONDS)
            processor = self.api.raw.app[WEBHOOKS].processor
            drained = processor.drain(retries_within=retries_within)
            await asyncio.wait_for(drained, PATIENCE_SECONDS)

    async def open_issue(
        self, title: str = "Make the widget blue", body: str = "It is red.", *, pickup: bool = True
    ) -> int:
        labels = [PICKUP] if pickup else []
        issue = await self.github.create_issue(self.repo, title=title, body=body, labels=labels)
        await self.settle()
        return issue.number

    def worker(self) -> InProcessWorker:
        return InProcessWorker(
            [rq_queue(self.ctx.queue_name, self.ctx.redis)],
            connection=self.ctx.redis,
            lifecycle=self.ctx,
        )

    async def work(self, *, max_jobs: int | None = None) -> None:
        """Run the queue dry in a thread (the sandbox keeps serving on this loop); no
        statement of bot/lifecycle/ ran on an event loop meanwhile, or before."""
        worker = self.worker()
        await asyncio.to_thread(worker.work, burst=True, max_jobs=max_jobs)
        await self.settle()
        self.check_off_the_loop("work()")

    def check_off_the_loop(self, during: str) -> None:
        """Fail on the statements bot/lifecycle/ ran on an event loop so far (each named by
        its callers, innermost first), once: later checks report only newer ones."""
        found = list(self._on_the_loop)
        self._on_the_loop.clear()
        assert not found, (
            f"{during}: bot/lifecycle/ ran {len(found)} database statement(s) on a thread "
            "with a running event loop (it stalls the run's heartbeat, its termination watch "
            "and the service's streams; `Database.run` or `asyncio.to_thread` moves it off):\n"
            + "\n".join(found)
        )

    def stop_watching(self) -> None:
        """Statements from now on are not looked at (the test is over)."""
        self._watch.close()

    def task(self, issue: int) -> Task:
        found = self.ctx.db.call(
            lambda s: s.query(Task).filter(Task.repo == self.repo, Task.issue == issue).one()
        )
        assert isinstance(found, Task)
        return found

    def events(self, task_id: int) -> list[TaskEvent]:
        return list(
            self.ctx.db.call(
                lambda s: (
                    s.query(TaskEvent)
                    .filter(TaskEvent.task_id == task_id)
                    .order_by(TaskEvent.id)
                    .all()
                )
            )
        )

    def decision_recorded_at(self, issue: int) -> datetime:
        """When the one Decision on `issue` was recorded: the day a Decision cited elsewhere
        is dated by (a test comparing it with today's would fail across midnight)."""
        task_id = self.task(issue).id
        (decision,) = [e for e in self.events(task_id) if e.kind == EventKind.DECISION]
        return decision.at

    def age_history(self, issue: int) -> None:
        """Move the task's recorded history a lease period (and a second) into the past: a
        reconciler pass now finds it as it would long after the last change's own label
        update, so labels that disagree are drift it repairs, not that update on its way."""
        task_id = self.task(issue).id
        back = _a_lease_and_a_second(self.ctx)

        def older(session: Session) -> None:
            for event in session.scalars(select(TaskEvent).where(TaskEvent.task_id == task_id)):
                event.at -= back

        self.ctx.db.call(older)

    def queued_jobs(self) -> list[str]:
        return list(rq_queue(self.ctx.queue_name, self.ctx.redis).job_ids)

    # What a person sees on GitHub, whole (bodies, drafts, labels): not only the fields
    # Steelframe's records read.
    async def comments(self, issue: int) -> list[dict[str, Any]]:
        return await self.github.paginate(self.repo, f"/issues/{issue}/comments", dict)

    async def labels(self, issue: int) -> set[str]:
        return set((await self.github.get_issue(self.repo, issue)).label_names)

    async def pulls(self, state: str = "all") -> list[dict[str, Any]]:
        return await self.github.paginate(self.repo, "/pulls", dict, params={"state": state})

    async def comment_as(self, login: str, issue: int, body: str, permission: str | None) -> None:
        """Post a comment as a person (with `permission` on the repo, or none)."""
        token = self.sandbox.user_token(login, permission)
        async with aiohttp.ClientSession() as http:
            response = await http.post(
                f"{self.sandbox.url}/repos/{self.repo}/issues/{issue}/comments",
                json={"body": body},
                headers={"Authorization": f"token {token}"},
            )
            assert response.status == 201, await response.text()
        await self.settle()

    def branch_file(self, name: str, branch: str) -> str | None:
        """A file's text on a branch of the sandbox's bare repository."""
        import subprocess

        git_path = self.sandbox.sandbox.world.repo(self.repo).git_path
        result = subprocess.run(
            ["git", "-C", str(git_path), "show", f"{branch}:{name}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return result.stdout if result.returncode == 0 else None


def a_lease_later(ctx: LifecycleContext) -> LifecycleContext:
    """The worker as its reconciler sees the world a lease period (and a second) from now:
    a queued task's grace is over, and labels that lag a task's last change are drift, no
    longer that change's own label update on its way."""
    ahead = _a_lease_and_a_second(ctx)
    return replace(ctx, clock=lambda: utcnow() + ahead)


def _a_lease_and_a_second(ctx: LifecycleContext) -> timedelta:
    return timedelta(seconds=ctx.policy.lease_seconds + 1)


async def start_lifecycle(
    sandbox: GitHubSandbox,
    api_factory: Callable[..., Any],
    tmp_path: Path,
    redis_url: str,
    **overrides: Any,
) -> Lifecycle:
    """The service (webhooks from the sandbox) and a bound worker context, for one test."""
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "task_time_limit": 30,
        # Long enough that a run's heartbeat, starved on a loaded machine, keeps its lease
        # (a lost lease stops the run and leaves the task `running`); tests of expiry set
        # their own.
        "task_lease_seconds": 15.0,
        "task_retry_backoff_seconds": 0.0,
        # A review's run starts at once: tests post a review's webhooks before they run the
        # worker (tests of the gathering set their own).
        "review_gather_seconds": 0.0,
        "task_max_attempts": 2,
        # A queue of this test's own (STEELFRAME_TASK_QUEUE): a worker thread a finished test
        # leaked (same Redis database, RQ polls by queue name) cannot take this test's jobs.
        "task_queue": f"{DEFAULT_QUEUE}-{uuid.uuid4().hex[:12]}",
        **sandbox_settings(tmp_path),
    }
    values.update(overrides)
    settings = sandbox.settings(tmp_path, **values)
    api = await api_factory(settings)
    assert api.services.lifecycle is not None and api.services.redis is not None
    sandbox.deliver_to(str(api.raw.make_url("/api/github/webhooks")))
    ctx = build_worker_context(
        settings,
        environ=os.environ,
        db=api.services.db,
        connection=api.services.redis,
        github=github_factory(settings),
        memory=api.services.memory,
    )
    return Lifecycle(sandbox, api, settings, ctx)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (killed, not yet reaped: dead to us)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def gone(*pids: int, within: float = PATIENCE_SECONDS) -> bool:
    """All `pids` died within `within` seconds (a SIGKILL lands asynchronously, and a
    process killed through its dead parent or its run's cgroup later still on a loaded
    machine). A caller whose processes would end by themselves meanwhile (a sleeper's own
    end, a time limit still running) passes a `within` that ends first."""
    try:
        await wait_for(lambda: not any(alive(pid) for pid in pids), within=within)
    except AssertionError:
        return False
    return True


Make = Callable[..., Awaitable[Lifecycle]]


@pytest.fixture(name="make")
async def make_fixture(
    github_sandbox: GitHubSandbox, api_factory: Any, tmp_path: Path, redis_url: str
) -> AsyncIterator[Make]:
    """`await make(**settings)`: the bench for one test. Test modules import this function,
    which registers the fixture under the name `make`."""

    built: list[Lifecycle] = []

    async def build(**overrides: Any) -> Lifecycle:
        lc = await start_lifecycle(github_sandbox, api_factory, tmp_path, redis_url, **overrides)
        built.append(lc)
        return lc

    yield build
    for lc in built:
        lc.stop_watching()
    for lc in built:  # what no `work()` reported: a worker run directly, the service's loop
        lc.check_off_the_loop("the test's end")
