"""A write into Redis never becomes code execution in a worker: a job hash an attacker
plants (a pickled payload, a JSON job naming `os.system`, a hostile callback) is refused by
the worker, nothing of it is imported or run, and the worker goes on serving real jobs."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import shlex
import zlib
from pathlib import Path
from typing import Any

import pytest
import redis
from rq import Callback, Queue
from rq.job import JobStatus

from bot.lifecycle.queue import LifecycleQueue
from bot.lifecycle.reconcile import run_reconcile
from bot.lifecycle.states import TaskState
from bot.lifecycle.trusted_jobs import (
    LIFECYCLE_JOB,
    ON_FAILURE,
    ON_STOPPED,
    RefusedJob,
    TrustedJob,
)
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make, a_lease_later, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.workers import start_worker, stop_processes

MARKER_MODULE = "tests.fakes.import_marker"
ROOT = Path(__file__).resolve().parent.parent


class _TouchOnLoad:
    """Unpickling this runs `touch PATH`: what the attacker's payload did."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {shlex.quote(str(self.path))}",))


def _plant(connection: redis.Redis, queue: str, job: str, data: bytes, **fields: Any) -> str:
    """Write a job hash straight into Redis and push its id onto the queue, as anything
    that reaches Redis can."""
    connection.hset(
        f"rq:job:{job}",
        mapping={
            "data": data,
            "origin": queue,
            "status": "queued",
            "created_at": "2026-01-01T00:00:00.000000Z",
            "description": "planted",
            **fields,
        },
    )
    connection.sadd("rq:queues", f"rq:queue:{queue}")
    connection.rpush(f"rq:queue:{queue}", job)
    return job


def _json_call(func: str, *args: Any) -> bytes:
    return zlib.compress(json.dumps([func, None, list(args), {}]).encode())


def _plant_attacks(connection: redis.Redis, queue: str, marks: Path) -> list[str]:
    """One job hash per attack; each leaves a file in `marks` if anything of it runs."""
    pickled = pickle.dumps((_TouchOnLoad(marks / "unpickled"), None, (), {}))
    return [
        _plant(
            connection,
            queue,
            "evil-pickle",
            pickled,
            meta=pickle.dumps(_TouchOnLoad(marks / "meta")),
        ),
        _plant(
            connection,
            queue,
            "evil-os-system",
            _json_call("os.system", f"touch {marks / 'system'}"),
        ),
        _plant(
            connection,
            queue,
            "evil-subprocess",
            _json_call("subprocess.call", ["touch", str(marks / "call")]),
        ),
        _plant(connection, queue, "evil-import", _json_call(f"{MARKER_MODULE}.touch", 1)),
        # Steelframe's own function with a hostile callback: the whole job is refused.
        _plant(
            connection,
            queue,
            "evil-callback",
            _json_call(LIFECYCLE_JOB, 999_999),
            success_callback_name=f"{MARKER_MODULE}.touch",
            failure_callback_name=f"{MARKER_MODULE}.touch",
            stopped_callback_name=ON_STOPPED,
        ),
    ]


@pytest.mark.slow
async def test_a_worker_process_refuses_planted_jobs_and_keeps_serving(
    make: Make, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    lc = await make(coding_command=command("commit"))
    planted = _plant_attacks(lc.ctx.redis, lc.ctx.queue_name, marks)
    log = tmp_path / "worker.log"
    # The worker can import the marker module (its directory is not the checkout's).
    env = {"STEELFRAME_TEST_IMPORT_MARK": str(marks / "imported"), "PYTHONPATH": str(ROOT)}
    worker = start_worker(lc, log, env=env)
    try:
        issue = await lc.open_issue()  # a real task, queued behind the planted jobs
        await wait_for(lambda: lc.task(issue).state == TaskState.DELIVERED, within=60)
        assert worker.poll() is None  # still serving
    finally:
        await stop_processes([worker], within=10)
    assert sorted(p.name for p in marks.iterdir()) == []  # nothing unpickled, imported or run
    output = log.read_text()
    for job in planted:
        assert TrustedJob.fetch(job, connection=lc.ctx.redis).get_status() == JobStatus.FAILED
        assert f"refused job {job}" in output, output
    assert "is not JSON" in output and "'os.system' is not a Steelframe job" in output
    assert "success callback 'tests.fakes.import_marker.touch' is not Steelframe's" in output
    await lc.settle()
    assert len(await lc.pulls()) == 1


async def test_an_in_process_worker_refuses_every_shape_of_planted_job(
    make: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("STEELFRAME_TEST_IMPORT_MARK", str(marks / "imported"))
    lc = await make(coding_command=command("commit"))
    connection, queue = lc.ctx.redis, lc.ctx.queue_name
    planted = [
        *_plant_attacks(connection, queue, marks),
        _plant(
            connection,
            queue,
            "evil-kwargs",
            zlib.compress(json.dumps([LIFECYCLE_JOB, None, [1], {"x": 1}]).encode()),
        ),
        _plant(connection, queue, "evil-args", _json_call(LIFECYCLE_JOB, "1; rm -rf /")),
        _plant(
            connection,
            queue,
            "evil-webhook",
            _json_call(LIFECYCLE_JOB, 999_999),
            webhooks=json.dumps([{"url": "http://127.0.0.1:9/steal", "job_status": "finished"}]),
        ),
        _plant(connection, queue, "evil-not-a-call", zlib.compress(b'{"a": 1}')),
    ]
    # A hash whose fields do not parse would stop RQ's loop: it is skipped instead.
    _plant(connection, queue, "evil-garbled", _json_call(LIFECYCLE_JOB, 1), timeout="never")
    issue = await lc.open_issue()
    await lc.work()
    assert sorted(p.name for p in marks.iterdir()) == []
    for job in planted:
        assert TrustedJob.fetch(job, connection=connection).get_status() == JobStatus.FAILED, job
    assert lc.task(issue).state == TaskState.DELIVERED


def test_a_trusted_job_says_why_it_refuses_before_importing_anything(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = tmp_path / "imported"
    monkeypatch.setenv("STEELFRAME_TEST_IMPORT_MARK", str(mark))
    connection = redis.Redis.from_url(redis_url)
    _plant(connection, "q", "hostile", _json_call(f"{MARKER_MODULE}.touch", 1))
    job = TrustedJob.fetch("hostile", connection=connection)
    assert (
        job.refusal()
        == "job hostile: its function 'tests.fakes.import_marker.touch' is not a Steelframe job"
    )
    with pytest.raises(RefusedJob):
        job.func  # noqa: B018
    assert job.failure_callback is None and job.stopped_callback is None
    assert not mark.exists()
    # The service's own reads (status, cancel) fetch as JSON: a pickled meta stays bytes.
    _plant(connection, "q", "pickled-meta", b"x", meta=pickle.dumps(_TouchOnLoad(mark)))
    assert LifecycleQueue(connection, name="q").status("pickled-meta") == JobStatus.QUEUED
    assert not mark.exists()
    # What Steelframe enqueues passes.
    LifecycleQueue(connection, name="q").enqueue(7, job="ours")
    ours = TrustedJob.fetch("ours", connection=connection)
    assert ours.refusal() is None and ours.args == [7]
    assert ours._failure_callback_name == ON_FAILURE


async def test_a_pickled_job_left_by_an_older_version_is_refused_and_its_task_runs(
    make: Make,
) -> None:
    """An upgrade finds a job pickled by the version before: it is refused like any other,
    and the reconciler enqueues the still-queued task again (acknowledged work is kept)."""
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    task = lc.task(issue)
    lc.ctx.redis.delete(f"rq:queue:{lc.ctx.queue_name}", f"rq:job:{task.job_id}")
    old = Queue(lc.ctx.queue_name, connection=lc.ctx.redis)  # RQ's default: pickle
    old.enqueue(
        LIFECYCLE_JOB,
        task.id,
        job_id=task.job_id,
        on_failure=Callback(ON_FAILURE),
        on_stopped=Callback(ON_STOPPED),
    )
    await lc.work()
    assert TrustedJob.fetch(str(task.job_id), connection=lc.ctx.redis).get_status() == "failed"
    assert lc.task(issue).state == TaskState.QUEUED  # refused: nothing ran, nothing lost
    later = a_lease_later(lc.ctx)
    report = await asyncio.to_thread(run_reconcile, later, say=lambda line: None)
    assert report.requeued == [task.id]
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
