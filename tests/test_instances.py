"""Two real `serve` processes on one PostgreSQL and one Redis, as behind a load balancer: a
chat turn started through one is resumed and stopped through the other, and a webhook
delivered to both is stored and processed once. With the GitHub sandbox App and two real
workers: work filed through one instance is run once, its deliveries sent to both are
processed once, and the operator's events stream on the other instance reports it all."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select

from bot.db import Database
from bot.lifecycle.models import Task
from bot.lifecycle.states import TaskState
from bot.models import ChatTurn
from bot.operators import create_operator
from steelframe.listening import announced_url
from tests.conftest import GITHUB_DATA, WEBHOOK_SECRET, GitHubSandbox, webhook_headers
from tests.fakes.coding import command
from tests.fakes.events import EventsFeed
from tests.fakes.lifecycle import wait_for
from tests.fakes.openai_server import Content, FakeOpenAI, Hold, Pause
from tests.fakes.sandbox import sandbox_settings
from tests.fakes.workers import settings_env, spawn_worker, stop_processes
from webhooks.deliveries import DeliveryStatus, WebhookDelivery

pytestmark = pytest.mark.slow  # two or more real `serve` processes (and workers) per test

MODEL = "instances-model"


async def _serve(env: dict[str, str], cwd: Path, started: list[asyncio.subprocess.Process]) -> str:
    """Start a serve process (kept in `started` at once, so it is stopped whatever fails
    next) and return its URL."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "steelframe.cli",
        "serve",
        "--port",
        "0",
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    started.append(process)
    assert process.stdout is not None
    while line := (await asyncio.wait_for(process.stdout.readline(), 120)).decode():
        if (url := announced_url(line)) is not None:  # a `url:` line or a JSON record
            return url
    raise AssertionError(f"serve printed no url (exit {await process.wait()})")


@pytest.fixture
async def instances(
    aiohttp_server: Any, pg_url: str, redis_url: str, tmp_path: Path
) -> AsyncIterator[tuple[list[str], str, FakeOpenAI, str]]:
    model = FakeOpenAI()
    model_server = await aiohttp_server(model.app())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEELFRAME_", "LOG_"))}
    env |= {
        "STEELFRAME_DATABASE_URL": pg_url,
        "STEELFRAME_REDIS_URL": redis_url,
        "STEELFRAME_RUNTIME": "openai",
        "STEELFRAME_MODEL": MODEL,
        "STEELFRAME_TOOL_ROUNDS": "0",
        "STEELFRAME_CHECKOUT": str(tmp_path),
        "OPENAI_BASE_URL": str(model_server.make_url("/v1")),
        "OPENAI_API_KEY": "sk-test",
        "WEBHOOK_SECRET": WEBHOOK_SECRET,
    }
    processes: list[asyncio.subprocess.Process] = []
    urls: list[str] = []
    try:
        for name in ("a", "b"):  # one after the other: the first applies the migrations
            data = {"STEELFRAME_DATA_DIR": str(tmp_path / name)}
            urls.append(await _serve(env | data, tmp_path, processes))
        database = Database.from_url(pg_url)
        _, token = database.call(create_operator, "operator")
        database.dispose()
        yield urls, token, model, pg_url
    finally:
        for process in processes:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 30)
                except TimeoutError:
                    process.kill()
                    await process.wait()


async def _frames(
    response: aiohttp.ClientResponse, stop_after: int | None = None
) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    async for raw in response.content:
        if raw.startswith(b"data: "):
            frames.append(json.loads(raw[6:]))
            deltas = sum(f["type"] == "delta" for f in frames)
            if frames[-1]["type"] in ("done", "error") or deltas == stop_after:
                break
    return frames


async def test_a_turn_resumes_and_stops_through_the_other_instance(
    instances: tuple[list[str], str, FakeOpenAI, str],
) -> None:
    (a, b), token, model, _ = instances
    # The pause outlasts redis-py's default 5 s socket timeout: the relay's blocking read
    # on B must survive a quiet turn (bot/redis_clients.py).
    model.enqueue(MODEL, [Content("w0 "), Content("w1 "), Pause(6.0), Content("w2 "), Hold()])
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        started = await http.post(f"{a}/api/operator/chat/stream", json={"message": "go on"})
        seen = await _frames(started, stop_after=2)
        session = started.headers["X-Steelframe-Session"]
        started.close()  # the client's route to instance A is gone

        resumed = await http.get(
            f"{b}/api/operator/chat/stream?session={session}",
            headers={"Last-Event-ID": str(seen[-1]["id"])},
        )
        assert resumed.status == 200
        more = await _frames(resumed, stop_after=1)
        assert [f["text"] for f in more if f["type"] == "delta"] == ["w2 "]
        assert more[0]["id"] == seen[-1]["id"] + 1  # nothing lost, nothing doubled

        stopped = await (await http.post(f"{b}/api/operator/chat/stop")).json()
        assert stopped["stopped"] is True and stopped["session"] == session
        rest = await _frames(resumed)
        assert rest[-1]["type"] == "error" and rest[-1]["reason"] == "stopped"
        await asyncio.wait_for(model.requests[-1].client_gone.wait(), 30)  # the model call closed


async def test_a_delivery_sent_to_both_instances_is_stored_and_processed_once(
    instances: tuple[list[str], str, FakeOpenAI, str],
) -> None:
    (a, b), _, _, pg_url = instances
    body = (GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_bytes()
    headers = webhook_headers(body, "issues", delivery="twice-delivered")
    async with aiohttp.ClientSession() as http:
        answers = await asyncio.gather(
            *(http.post(f"{url}/api/github/webhooks", data=body, headers=headers) for url in (a, b))
        )
        assert sorted(answer.status for answer in answers) == [200, 202]  # one is the duplicate

    database = Database.from_url(pg_url)
    try:

        def rows() -> list[tuple[str, int]]:
            return database.call(
                lambda s: [(d.status, d.attempts) for d in s.scalars(select(WebhookDelivery))]
            )

        await wait_for(lambda: rows() == [("processed", 1)], within=60)
    finally:
        database.dispose()


@pytest.fixture
async def fleet(
    github_sandbox: GitHubSandbox, pg_url: str, redis_url: str, tmp_path: Path
) -> AsyncIterator[tuple[list[str], str]]:
    """Two `serve` instances and two `steelframe worker`s (real processes) on one PostgreSQL
    and one Redis, with the sandbox App; the sandbox sends its webhooks to the first."""
    settings = github_sandbox.settings(
        tmp_path,
        database_url=pg_url,
        redis_url=redis_url,
        coding_command=command("commit"),
        task_time_limit=60,
        task_lease_seconds=5.0,
        task_retry_backoff_seconds=0.0,
        task_max_attempts=2,
        **sandbox_settings(tmp_path),
    )
    # A heartbeat longer than redis-py's default 5 s socket timeout: the events stream's
    # blocking read must outlast it (bot/redis_clients.py).
    env = settings_env(settings) | {"STEELFRAME_HEARTBEAT_SECONDS": "7"}
    processes: list[asyncio.subprocess.Process] = []
    workers: list[subprocess.Popen[bytes]] = []
    try:
        urls = []
        for name in ("a", "b"):  # one after the other: the first applies the migrations
            data = {"STEELFRAME_DATA_DIR": str(tmp_path / f"serve-{name}")}
            urls.append(await _serve(env | data, tmp_path, processes))
        for number in (1, 2):
            workers.append(spawn_worker(settings, tmp_path / f"worker-{number}.log"))
        github_sandbox.deliver_to(f"{urls[0]}/api/github/webhooks")
        database = Database.from_url(pg_url)
        _, token = database.call(create_operator, "operator")
        database.dispose()
        yield urls, token
    finally:
        await stop_processes(workers)
        for process in processes:
            if process.returncode is None:
                process.terminate()
                await process.wait()


def _no_result(pg_url: str, session_id: str, logs: Path) -> str:
    """What to look at when a delivered task's result event never came: whether the result
    was written to the session at all, and what the workers logged."""
    database = Database.from_url(pg_url)
    try:
        turns = database.call(
            lambda s: [
                (turn.id, (turn.meta or {}).get("kind"))
                for turn in s.scalars(select(ChatTurn).where(ChatTurn.session_id == session_id))
            ]
        )
    finally:
        database.dispose()
    tails = "\n".join(
        f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        for log in sorted(logs.glob("worker-*.log"))
    )
    return f"no result event within 90 s; the session's turns: {turns}\n{tails}"


async def test_work_filed_through_one_instance_reaches_the_events_stream_on_the_other(
    fleet: tuple[list[str], str], github_sandbox: GitHubSandbox, pg_url: str, tmp_path: Path
) -> None:
    (a, b), token = fleet
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession(base_url=a, headers=headers) as on_a,
        aiohttp.ClientSession(base_url=b, headers=headers) as on_b,
    ):
        # The operator watches through B (and a second client through A).
        feed, also = await EventsFeed.open(on_b), await EventsFeed.open(on_a)
        try:
            await feed.wait_pings(1)  # a quiet heartbeat's wait (7 s) and the stream lives on
            filing = await (await on_a.post("/api/operator/chat/new", json={})).json()
            filed = await on_a.post(
                "/api/operator/chat/file",
                json={"session": filing["id"], "title": "Make the widget blue", "body": "Red."},
            )
            assert filed.status == 201, await filed.text()
            issue = (await filed.json())["filed_issue_number"]

            def event_for(kind: str, **fields: Any) -> Any:
                return lambda f: f["type"] == kind and all(f.get(k) == v for k, v in fields.items())

            await feed.wait_for(event_for("session", session_id=filing["id"], change="created"))
            delivered = await feed.wait_for(
                event_for("task", issue=issue, state=TaskState.DELIVERED), within=180
            )
            try:
                result = await feed.wait_for(
                    event_for("result", session_id=filing["id"]), within=90
                )
            except TimeoutError:
                raise AssertionError(_no_result(pg_url, filing["id"], tmp_path)) from None
            await also.wait_for(event_for("task", issue=issue, state=TaskState.DELIVERED))
        finally:
            await feed.close()
            await also.close()
    assert result["kind"] == "delivered" and result["task_id"] == delivered["task_id"]
    states = [f["state"] for f in feed.of_type("task") if f["task_id"] == delivered["task_id"]]
    assert states[0] == "queued" and "running" in states and states[-1] == "delivered"

    # Every webhook the sandbox sent to A (the issue, the pull request, comments...) is now
    # sent to B as well, as a load balancer retrying on the other instance would.
    await github_sandbox.settle()
    sent = list(github_sandbox.sandbox.hooks.sent)
    assert sent and all(d.status is not None and d.status < 300 for d in sent)
    github_sandbox.deliver_to(f"{b}/api/github/webhooks")
    for delivery in sent:
        github_sandbox.sandbox.hooks.redeliver(delivery.id)
    await github_sandbox.settle()
    assert all(d.status is not None and d.status < 300 for d in sent)

    database = Database.from_url(pg_url)
    try:

        def stored() -> dict[str, tuple[str, int]]:
            return database.call(
                lambda s: {
                    d.delivery_id: (d.status, d.attempts)
                    for d in s.scalars(select(WebhookDelivery))
                }
            )

        ids = {d.id for d in sent}

        # Done either way: handled, or stored with no handler for its action (the CI events
        # GitHub sends as a run starts, `check_suite.requested`...: nothing to process).
        done = {DeliveryStatus.PROCESSED, DeliveryStatus.IGNORED}

        def processed() -> bool:
            rows = stored()
            return ids <= set(rows) and all(rows[i][0] in done for i in ids)

        await wait_for(processed, within=60)
        rows = stored()
        handled = [i for i in ids if rows[i][0] == DeliveryStatus.PROCESSED]
        assert handled and all(rows[i][1] == 1 for i in handled), rows  # once, on one instance
        tasks = database.call(lambda s: s.scalars(select(Task).where(Task.issue == issue)).all())
        assert [(t.state, t.attempts) for t in tasks] == [(TaskState.DELIVERED, 1)]
    finally:
        database.dispose()
