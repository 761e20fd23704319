"""Task lifecycle on RQ with a no-op coding runtime, beside bare RQ in the same run.

Measures (a) enqueue -> job start latency (RQ's own `enqueued_at`/`started_at` stamps, one
task at a time on an idle worker), also from the `Pickups.pickup()` call, and (b) tasks
per minute through the whole pipeline (pickup, job, lease, clone of a local bare repo,
runtime, commit, push, pull request, labels, progress comment, delivered) with one
in-process worker, against the local GitHub sandbox. The baseline is a bare RQ job that does
nothing, on the same Redis and the same worker class. Ratios are lifecycle / bare.

    python -m bench.lifecycle [--tasks N] [--redis-url URL] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shlex
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from bench._stats import percentile, ratio, summary_ms
from bot import db as dbmod
from bot.config import Settings
from bot.config_values import Secret
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.models import Task
from bot.lifecycle.pickup import Pickups
from bot.lifecycle.queue import LifecycleQueue, rq_queue
from bot.lifecycle.states import FINISHED
from bot.lifecycle.trusted_jobs import JOB_FUNCTIONS, TrustedJob
from bot.lifecycle.worker import InProcessWorker, LifecycleJob
from steelframe.worker_context import build_worker_context

REPO = "bench/widgets"
APP_ID = 777
NOOP = Path(__file__).with_name("_noop_runtime.py")
# By import path: run as `python -m bench.lifecycle`, this module is __main__.
NOOP_JOB = "bench.lifecycle.noop_job"


def noop_job(lifecycle: LifecycleContext, task_id: int) -> None:
    """The baseline: a job that does nothing (its worker hands it the context, as it does
    every job, and it is enqueued with a task id, as they are)."""


class BenchJob(LifecycleJob):
    """The lifecycle's job class with the baseline's no-op on its allowlist."""

    functions = JOB_FUNCTIONS | {NOOP_JOB}


def _seconds(start: datetime | None, end: datetime | None) -> float:
    assert start is not None and end is not None
    return (end - start).total_seconds()


class Background:
    """An in-process worker on a thread, working until stopped. Used as `async with`: the
    sandbox serves on this event loop, so waiting for the thread must not block it."""

    def __init__(self, lifecycle: LifecycleContext, queue: str) -> None:
        connection = lifecycle.redis
        self.worker = InProcessWorker(
            [rq_queue(queue, connection)],
            connection=connection,
            lifecycle=lifecycle,
            jobs=BenchJob,
        )
        self.thread = threading.Thread(
            target=self.worker.work, kwargs={"with_scheduler": False, "logging_level": "WARNING"}
        )

    async def __aenter__(self) -> Background:
        self.thread.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.worker.stop()
        await asyncio.to_thread(self.thread.join, 60)


async def _until(predicate: Any, *, within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    while not await asyncio.to_thread(predicate):
        if time.monotonic() > deadline:
            raise TimeoutError("the benchmark stalled")
        await asyncio.sleep(0.005)


async def bare_rq(
    settings: Settings, connection: redis.Redis, n_latency: int, n_throughput: int
) -> dict[str, Any]:
    name = f"bench-bare-rq-{uuid.uuid4().hex[:8]}"
    queue = rq_queue(name, connection)
    latencies: list[float] = []
    ctx = build_worker_context(settings, environ=os.environ, connection=connection, memory=None)
    async with Background(ctx, name):
        for _ in range(n_latency):
            job = queue.enqueue(NOOP_JOB, 0)
            await _until(lambda job=job: job.get_status() == "finished")
            job.refresh()
            latencies.append(_seconds(job.enqueued_at, job.started_at))
        started = time.perf_counter()
        jobs = [queue.enqueue(NOOP_JOB, 0) for _ in range(n_throughput)]
        await _until(lambda: all(j.get_status() == "finished" for j in jobs))
        elapsed = time.perf_counter() - started
    ctx.db.dispose()
    return {"latency": latencies, "per_minute": n_throughput / elapsed * 60}


async def lifecycle(
    settings: Settings, connection: redis.Redis, github: Any, n_latency: int, n_throughput: int
) -> dict[str, Any]:
    db = dbmod.Database.from_url(settings.database_url)
    dbmod.upgrade(db.engine)
    # A queue of its own, so a shared Redis given with --redis-url is left as it was.
    queue = f"bench-lifecycle-{uuid.uuid4().hex[:8]}"
    ctx = build_worker_context(
        settings, environ=os.environ, db=db, connection=connection, memory=None, queue_name=queue
    )
    pickups = Pickups(
        db=db,
        queue=LifecycleQueue(connection, name=queue, time_limit=settings.task_time_limit),
        github=github,
        pickup_labels=settings.pickup_labels,
    )
    numbers = [
        (await github.create_issue(REPO, title=f"Task {n}", body="bench", labels=[])).number
        for n in range(n_latency + n_throughput)
    ]

    def finished(task_ids: list[int]) -> bool:
        """Every task finished and its job done (its last GitHub edits come after the state)."""
        rows = db.call(lambda s: [(s.get(Task, i).state, s.get(Task, i).job_id) for i in task_ids])
        return all(
            state in FINISHED
            and TrustedJob.fetch(str(job), connection=connection).get_status() == "finished"
            for state, job in rows
        )

    rq_latency: list[float] = []
    pickup_latency: list[float] = []
    failed: list[int] = []
    async with Background(ctx, ctx.queue_name):
        for number in numbers[:n_latency]:
            called = datetime.now(UTC)
            result = await pickups.pickup(REPO, number, title=f"Task {number}", cause="bench")
            await _until(lambda result=result: finished([result.task_id]))
            task = db.call(lambda s, i=result.task_id: s.get(Task, i))
            job = TrustedJob.fetch(str(task.job_id), connection=connection)
            rq_latency.append(_seconds(job.enqueued_at, job.started_at))
            pickup_latency.append(_seconds(called, job.started_at))
            if task.state != "delivered":
                failed.append(task.id)
        started = time.perf_counter()
        ids = [
            (await pickups.pickup(REPO, number, title=f"Task {number}", cause="bench")).task_id
            for number in numbers[n_latency:]
        ]
        await _until(lambda: finished(ids))
        elapsed = time.perf_counter() - started
    states = db.call(lambda s: [s.get(Task, i).state for i in ids])
    failed += [i for i, state in zip(ids, states, strict=True) if state != "delivered"]
    db.dispose()
    return {
        "latency": rq_latency,
        "pickup_latency": pickup_latency,
        "per_minute": n_throughput / elapsed * 60,
        "failed": failed,
    }


async def run(n_latency: int, n_throughput: int, redis_url: str | None) -> dict[str, Any]:
    from bot.github.client import GitHubClient
    from bot.github.pacing import PacingPolicy
    from github_sandbox import Sandbox, generate_app_keys, serve_sandbox

    with tempfile.TemporaryDirectory(prefix="sf-bench-") as tmp:
        root = Path(tmp)
        embedded = None
        if redis_url is None:
            from steelframe.embedded_redis import start_embedded_redis

            embedded = start_embedded_redis(root / "redis")
            redis_url = embedded.url
        private, public = generate_app_keys()
        sandbox = Sandbox(app_id=APP_ID, public_key_pem=public, root=root / "git")
        server = await serve_sandbox(sandbox)
        installation = sandbox.install("bench", account_type="Organization", notify=False)
        sandbox.add_repo(REPO, installation=installation, notify=False)
        settings = Settings.from_env(
            {},
            defaults={
                "database_url": f"sqlite:///{root / 'bench.db'}",
                "data_dir": root / "var",
                "checkout": root,
                "redis_url": redis_url,
                "app_id": APP_ID,
                "private_key": Secret(private),
                "github_api_url": server.url,
                "github_write_interval": 0.0,
                "repo": REPO,
                "coding_command": shlex.join([sys.executable, str(NOOP)]),
                # The no-op runtime runs in the coding sandbox like any: it sees the
                # interpreter and itself.
                "coding_read_only_paths": (
                    Path(sys.prefix),
                    Path(sys.base_prefix),
                    NOOP.parent,
                ),
                "task_lease_seconds": 30.0,
            },
        )
        connection = redis.Redis.from_url(redis_url)
        github = GitHubClient(
            app_id=APP_ID,
            private_key=Secret(private),
            base_url=server.url,
            pacing=PacingPolicy(min_interval=0),
        )
        try:
            bare = await bare_rq(settings, connection, n_latency, n_throughput)
            steel = await lifecycle(settings, connection, github, n_latency, n_throughput)
        finally:
            await github.close()
            await server.close()
            connection.close()
            if embedded is not None:
                embedded.stop()
    return {"bare": bare, "lifecycle": steel}


def report(results: dict[str, Any], n_latency: int, n_throughput: int) -> None:
    bare, steel = results["bare"], results["lifecycle"]
    print(
        f"task lifecycle on RQ: 1 in-process worker, SQLite, local GitHub sandbox, no-op runtime"
        f" ({n_latency} tasks one at a time, then {n_throughput} at once)"
    )
    print(f"  enqueue -> job start      lifecycle {summary_ms(steel['latency'])}")
    print(f"  {'':24}  bare RQ   {summary_ms(bare['latency'])}")
    p50 = ratio(percentile(steel["latency"], 50), percentile(bare["latency"], 50))
    p99 = ratio(percentile(steel["latency"], 99), percentile(bare["latency"], 99))
    print(f"  {'':24}  ratio p50 {p50}  p99 {p99}")
    print(f"  pickup() -> job start     lifecycle {summary_ms(steel['pickup_latency'])}")
    print(
        f"  throughput                lifecycle {steel['per_minute']:9.1f} tasks/min"
        f" (whole pipeline, to job done)"
    )
    print(f"  {'':24}  bare RQ   {bare['per_minute']:9.1f} no-op jobs/min")
    print(f"  {'':24}  ratio     {ratio(steel['per_minute'], bare['per_minute'])}")
    if steel["failed"]:
        print(f"  NOT DELIVERED: tasks {steel['failed']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tasks", type=int, default=40, help="tasks for each measurement")
    parser.add_argument("--redis-url", default=None, help="default: an embedded Redis")
    parser.add_argument("--smoke", action="store_true", help="tiny run for the test suite")
    args = parser.parse_args(argv)
    n = 3 if args.smoke else args.tasks
    logging.basicConfig(level=logging.WARNING)
    results = asyncio.run(run(n, n, args.redis_url))
    report(results, n, n)


if __name__ == "__main__":
    main()
