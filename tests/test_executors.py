"""The thread pools a serving process hands work to from its event loop are running before it
serves (bot/executors.py): no request waits on the loop for a `Thread.start`, which a loaded
machine stretched to seconds (a sessions list answered 30 s late)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.config_values import Secret
from bot.db import FIRST_READ_THREADS, first_reads
from bot.executors import StartedThreadPool, default_executor_size, start_default_executor
from tests.conftest import WEBHOOK_SECRET, ApiClient, make_settings, webhook_headers
from tests.fakes.patience import PATIENCE_SECONDS
from webhooks.deps import WEBHOOKS


@dataclass(frozen=True)
class ThreadStart:
    started: threading.Thread
    asked_by: threading.Thread  # the thread that called `start` (and waited for it)


def record_thread_starts(monkeypatch: pytest.MonkeyPatch) -> list[ThreadStart]:
    """Every `Thread.start` from now on (until `monkeypatch` undoes it), with its caller."""
    starts: list[ThreadStart] = []
    start = threading.Thread.start

    def recorded(thread: threading.Thread) -> None:
        starts.append(ThreadStart(thread, threading.current_thread()))
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", recorded)
    return starts


@pytest.fixture(params=["local", "redis"])
async def served(
    request: pytest.FixtureRequest, api_factory: Callable[..., Any], tmp_path: Path
) -> ApiClient:
    """The real app, with a webhook secret so deliveries go through the webhook intake; on
    its own, and with Redis (turn locks, the frame relay, the events stream, the task queue)."""
    redis = {"redis_url": request.getfixturevalue("redis_url")} if request.param == "redis" else {}
    settings = make_settings(tmp_path, webhook_secret=Secret(WEBHOOK_SECRET), **redis)
    return await api_factory(settings)


async def test_a_burst_of_requests_starts_no_thread_on_the_event_loop(
    served: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    operators = [served.new_operator(f"burst-{n}") for n in range(4)]
    star = b'{"action": "created", "starred_at": null}'
    loop_thread = threading.current_thread()  # the test's loop serves the app
    with monkeypatch.context() as patch:
        starts = record_thread_starts(patch)
        answers = await asyncio.gather(
            # chat turns on the offline runtime: reads, retrieval, group-committed writes
            *(op.post("/api/operator/chat", json={"message": "What is open?"}) for op in operators),
            # the first reads' pool, then the default executor
            *(served.get("/api/operator/chat/sessions") for _ in range(12)),
            *(served.get("/api/operator/board") for _ in range(6)),
            # the webhook intake's own SQLite thread
            *(
                served.raw.post(
                    "/api/github/webhooks",
                    data=star,
                    headers=webhook_headers(star, "star", delivery=f"star-{n}"),
                )
                for n in range(4)
            ),
        )
        assert [answer.status for answer in answers] == [200] * 22 + [202] * 4
        for answer in answers:
            await answer.read()
        await asyncio.wait_for(served.raw.app[WEBHOOKS].processor.drain(), PATIENCE_SECONDS)
    on_the_loop = [start.started.name for start in starts if start.asked_by is loop_thread]
    assert on_the_loop == []


async def test_every_pool_thread_is_running_once_the_app_has_started(
    api_factory: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        starts = record_thread_starts(patch)
        await api_factory(make_settings(tmp_path))
    started_by_the_app = {start.started for start in starts if start.started.is_alive()}
    # The loop's default executor, at asyncio's size, each thread started at start-up; the
    # app made it the loop's for good (asking again, as a second app would, gives it back).
    default = start_default_executor(asyncio.get_running_loop())
    assert [thread.name for thread in default.threads] == [
        f"asyncio_{n}" for n in range(default_executor_size())
    ]
    assert set(default.threads) <= started_by_the_app
    # The webhook intake's SQLite thread.
    assert "webhook-writer_0" in {thread.name for thread in started_by_the_app}
    # The first reads' pool: one per process, made by the first app this process started.
    assert len(first_reads().threads) == FIRST_READ_THREADS
    assert all(thread.is_alive() for thread in first_reads().threads)


def test_a_started_pool_runs_work_without_starting_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = StartedThreadPool(3, thread_name_prefix="started")
    try:
        assert [thread.name for thread in pool.threads] == ["started_0", "started_1", "started_2"]
        with monkeypatch.context() as patch:
            starts = record_thread_starts(patch)
            # more at once than it has threads: they queue, none starts a thread
            ran = [pool.submit(threading.get_ident) for _ in range(12)]
            idents = {future.result(timeout=PATIENCE_SECONDS) for future in ran}
        assert starts == []
        assert idents <= {thread.ident for thread in pool.threads}
    finally:
        pool.shutdown(wait=True)
    assert not any(thread.is_alive() for thread in pool.threads)


def test_the_default_executor_keeps_asyncios_size() -> None:
    stock = ThreadPoolExecutor()  # what asyncio makes for a loop that has no default executor
    try:
        assert default_executor_size() == stock._max_workers  # type: ignore[attr-defined]
    finally:
        stock.shutdown()
