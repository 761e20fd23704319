"""The operator events stream: per-operator logs (in process and in Redis streams), the SSE
endpoint with Last-Event-ID resume and heartbeats, across instances, and task results
pushed live while the operator sits in another session."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from bot import db as dbmod
from bot.contracts.events import EventFrame, LedgerCounts, ResyncFrame, SessionFrame, TaskFrame
from bot.db import Database
from bot.events import EventLog, LocalEventLog, OperatorEvents, RedisEventLog, publisher
from bot.events.publisher import SessionChange
from bot.lifecycle.announce import TASK_RESULT
from bot.lifecycle.models import ChatDelivery
from bot.lifecycle.reconcile import lock_bounded, run_reconcile
from bot.lifecycle.states import TaskState
from bot.models import ChatTurn, Operator
from bot.operators import create_operator
from bot.redis_clients import blocking_reader
from steelframe.embedded_redis import EmbeddedRedis
from tests.conftest import make_settings
from tests.fakes.coding import command
from tests.fakes.events import EVENTS, EventsFeed
from tests.fakes.lifecycle import PATIENCE_SECONDS, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.own_redis import start_redis_at
from tests.fakes.ports import restartable_port


@pytest.fixture(params=["local", "redis", "redis-resp3"])
def event_log(request: pytest.FixtureRequest) -> Iterator[EventLog]:
    if request.param == "local":
        yield LocalEventLog(maxlen=5)
        return
    url = request.getfixturevalue("redis_url")
    if request.param == "redis-resp3":  # XREAD answers in another shape
        url += ("&" if "?" in url else "?") + "protocol=3"
    log = RedisEventLog(redis.Redis.from_url(url), reader=aioredis.Redis.from_url(url))
    yield log
    log.client.close()


async def test_ids_are_monotonic_per_operator_and_reads_resume_after_an_id(
    event_log: EventLog,
) -> None:
    assert [event_log.append(1, _session(n)) for n in range(3)] == [1, 2, 3]
    assert event_log.append(2, _session(0)) == 1  # another operator, its own ids
    batch = await event_log.read(1, 1, wait=0.1)
    assert [(e.id, e.frame) for e in batch.events] == [(2, _session(1, 2)), (3, _session(2, 3))]
    assert not batch.gap and await event_log.last_id(1) == 3
    idle = await event_log.read(1, 3, wait=0.05)
    assert idle.events == [] and not idle.gap
    await event_log.close()


async def test_a_waiting_reader_wakes_on_an_append_from_another_thread(
    event_log: EventLog,
) -> None:
    reading = asyncio.create_task(event_log.read(7, 0, wait=30))
    await asyncio.sleep(0.05)  # let the reader block first (not a timing assertion)
    writer = threading.Thread(target=event_log.append, args=(7, _task(1)))
    writer.start()
    batch = await asyncio.wait_for(reading, 30)
    await asyncio.to_thread(writer.join, 30)
    assert [(e.type, e.frame) for e in batch.events] == [("task", _task(1, id=1))]
    await event_log.close()


async def test_an_id_the_log_no_longer_has_or_never_had_is_a_gap(
    event_log: EventLog, request: pytest.FixtureRequest
) -> None:
    for n in range(8):
        event_log.append(3, _session(n))
    if isinstance(event_log, RedisEventLog):
        stream, _ = RedisEventLog.keys(3)
        event_log.client.xtrim(stream, maxlen=5, approximate=False)
    dropped = await event_log.read(3, 1, wait=0.1)
    assert dropped.gap and dropped.last_id == 8
    kept = await event_log.read(3, 3, wait=0.1)  # 4..8 are still there
    assert not kept.gap and [e.id for e in kept.events] == [4, 5, 6, 7, 8]
    ahead = await event_log.read(3, 50, wait=0.1)  # the log restarted below the client
    assert ahead.gap and ahead.last_id == 8
    await event_log.close()


async def test_the_stream_needs_the_operators_token_and_an_integer_last_event_id(
    api: Any,
) -> None:
    assert (await api.raw.get(EVENTS)).status == 401
    bad = await api.get(EVENTS, headers={"Last-Event-ID": "yesterday"})
    assert bad.status == 400
    assert (await bad.json())["detail"]["field"] == "Last-Event-ID"


async def test_session_changes_reach_their_own_operator_only(api: Any) -> None:
    other = api.new_operator("someone-else")
    mine, theirs = await EventsFeed.open(api), await EventsFeed.open(other)
    try:
        created = await (await api.post("/api/operator/chat/new", json={})).json()
        event = await mine.wait_for(lambda f: f["type"] == "session")
        assert event == {
            "id": event["id"],
            "type": "session",
            "session_id": created["id"],
            "change": "created",
        }
        assert (await api.post("/api/operator/chat", json={"message": "hello"})).status == 200
        await mine.wait_for(lambda f: f.get("change") == "updated")
        await api.delete(f"/api/operator/chat/session/{created['id']}")
        await mine.wait_for(lambda f: f.get("change") == "deleted")
        ids = [f["id"] for f in mine.frames]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        # the other operator's stream saw none of it (its heartbeats prove it was live)
        await theirs.wait_pings(2)
        assert theirs.frames == []
    finally:
        await mine.close()
        await theirs.close()


async def test_a_client_that_reconnects_with_last_event_id_gets_what_it_missed(
    api: Any,
) -> None:
    first = await EventsFeed.open(api)
    await api.post("/api/operator/chat/new", json={})
    seen = await first.wait_for(lambda f: f["type"] == "session")
    await first.close()
    missed = [await (await api.post("/api/operator/chat/new", json={})).json() for _ in range(2)]
    again = await EventsFeed.open(api, last_event_id=seen["id"])
    try:
        created = [m["id"] for m in missed]
        await again.wait_for(
            lambda f: f.get("session_id") == created[-1] and f["change"] == "created"
        )
        replayed = [f for f in again.frames if f.get("change") == "created"]
        assert [f["session_id"] for f in replayed] == created
        assert all(f["id"] > seen["id"] for f in again.frames)
    finally:
        await again.close()


async def test_heartbeats_are_ping_comments_while_nothing_happens(api: Any) -> None:
    feed = await EventsFeed.open(api)  # heartbeat_seconds is 0.2 in the test settings
    try:
        await feed.wait_pings(3)
        assert feed.frames == []
    finally:
        await feed.close()


async def test_an_event_made_on_one_instance_reaches_a_client_of_another(
    api_factory: Any, tmp_path: Path, redis_url: str
) -> None:
    settings = make_settings(tmp_path, redis_url=redis_url)
    first = await api_factory(settings)
    second = (await api_factory(settings)).as_operator(first.token)
    feed = await EventsFeed.open(second)
    try:
        created = await (await first.post("/api/operator/chat/new", json={})).json()
        await feed.wait_for(lambda f: f.get("session_id") == created["id"])
    finally:
        await feed.close()
    # a reconnect to the first instance resumes from the id the second one gave
    resumed = await EventsFeed.open(first, last_event_id=0)
    try:
        await resumed.wait_for(lambda f: f.get("session_id") == created["id"])
    finally:
        await resumed.close()


async def test_a_delivery_while_the_operator_is_in_another_session_is_pushed_live(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    api = lc.api
    filing = await (await api.post("/api/operator/chat/new", json={})).json()
    filed = await api.post(
        "/api/operator/chat/file",
        json={"session": filing["id"], "title": "Make the widget blue", "body": "It is red."},
    )
    assert filed.status == 201, await filed.text()
    issue = (await filed.json())["filed_issue_number"]
    elsewhere = await (await api.post("/api/operator/chat/new", json={})).json()
    assert elsewhere["id"] != filing["id"]
    feed = await EventsFeed.open(api, last_event_id=0)
    try:
        await lc.work()
        task_id = lc.task(issue).id
        result = await feed.wait_for(lambda f: f["type"] == "result")
        assert result["session_id"] == filing["id"] and result["task_id"] == task_id
        assert result["kind"] == "delivered" and "pull request" in result["text"]
        delivered = await feed.wait_for(
            lambda f: f["type"] == "task" and f["state"] == TaskState.DELIVERED
        )
        assert delivered["issue"] == issue
        assert delivered["pr_url"] and delivered["pr_url"] == lc.task(issue).pr_url
        states = [f["state"] for f in feed.of_type("task") if f["task_id"] == task_id]
        assert states[:2] == ["queued", "running"] and states[-1] == "delivered"
        assert set(delivered) == {
            "id",
            "type",
            "task_id",
            "repo",
            "issue",
            "title",
            "state",
            "pr_url",
            "cost_usd",
            "tokens",
            "reason",
            "updated_at",
            "pr_state",
            "review",
            "ready_for_review",
            "question",
            "result_session",
        }
        # The delivery names the chat its result goes to (a client showing that chat tells
        # the change once, by the result); the moves before it have no result to post.
        assert delivered["result_session"] == filing["id"]
        moves = [f for f in feed.of_type("task") if f["task_id"] == task_id][:2]
        assert [f["result_session"] for f in moves] == [None, None]
        # What the Board card shows of the pull request loop, so no client reads the task
        # for it: the pull request is open, nobody reviewed it yet, it is ready for review.
        assert delivered["pr_state"] == "open" and delivered["ready_for_review"] is True
        assert delivered["review"] == {
            "open": 0,
            "addressed": 0,
            "declined": 0,
            "needs_operator": 0,
            "summary": "",
        }
        assert delivered["question"] is None
        assert delivered["cost_usd"] == lc.task(issue).cost_usd > 0  # the run reported one
        assert delivered["tokens"] == lc.task(issue).tokens_used > 0
        # the message the event names is in the filing session, not in the one the operator sits in
        stored = await (await api.get(f"/api/operator/chat?session={filing['id']}")).json()
        assert result["message_id"] in [m["id"] for m in stored["messages"]]
        active = await (await api.get("/api/operator/chat")).json()
        assert active["session"] == elsewhere["id"] and active["messages"] == []
    finally:
        await feed.close()


async def test_a_result_the_periodic_reconciler_delivers_reaches_the_events_stream(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    filing = await (await lc.api.post("/api/operator/chat/new", json={})).json()
    filed = await lc.api.post(
        "/api/operator/chat/file",
        json={"session": filing["id"], "title": "Make the widget blue", "body": "It is red."},
    )
    assert filed.status == 201, await filed.text()
    await lc.settle()  # the filed issue's webhook may hold the pickup, its job not yet enqueued
    await lc.work()

    def undeliver(session: Session) -> None:
        """The worker died between the task's transition and the result's delivery."""
        session.execute(delete(ChatDelivery))
        session.execute(delete(ChatTurn).where(ChatTurn.meta["kind"].as_string() == TASK_RESULT))

    lc.ctx.db.call(undeliver)
    feed = await EventsFeed.open(lc.api)
    try:
        # The pass `steelframe worker`'s reconciler thread runs, on the engine it runs on.
        with lock_bounded(lc.ctx) as periodic:
            report = await asyncio.to_thread(run_reconcile, periodic, say=lambda line: None)
        assert report.chat_results == 1
        result = await feed.wait_for(lambda f: f["type"] == "result")
        assert result["session_id"] == filing["id"] and result["kind"] == "delivered"
    finally:
        await feed.close()


async def test_a_lost_counter_never_reuses_an_id(redis_url: str) -> None:
    log = RedisEventLog(redis.Redis.from_url(redis_url), reader=aioredis.Redis.from_url(redis_url))
    try:
        assert [log.append(9, _session(n)) for n in range(3)] == [1, 2, 3]
        log.client.delete(RedisEventLog.keys(9)[1])  # the counter evicted, the stream kept
        assert log.append(9, _session(3)) == 4
        batch = await log.read(9, 3, wait=0.1)
        assert [(e.id, e.frame) for e in batch.events] == [(4, _session(3, 4))]
    finally:
        await log.close()
        log.client.close()


async def test_an_entry_that_is_no_frame_reads_as_a_resync(redis_url: str) -> None:
    # An entry an older release wrote ({"type", "data"}), or one that no longer decodes:
    # the client is told to reload instead of being sent a frame its schema does not know.
    log = RedisEventLog(redis.Redis.from_url(redis_url), reader=aioredis.Redis.from_url(redis_url))
    try:
        stream, counter = RedisEventLog.keys(4)
        log.client.xadd(stream, {"e": '{"type":"task","data":{"task_id":1}}'}, id="1-1")
        log.client.set(counter, 1)
        assert log.append(4, _session(1)) == 2
        batch = await log.read(4, 0, wait=0.1)
        assert [e.frame for e in batch.events] == [
            ResyncFrame(id=1, reason="events were missed"),
            _session(1, 2),
        ]
    finally:
        await log.close()
        log.client.close()


async def test_300_operators_waiting_on_their_events_at_once_all_get_them(
    redis_url: str,
) -> None:
    # Each waiting operator holds a connection in a blocking XREAD: a pool of 100 failed
    # the 101st with MaxConnectionsError, and its events stream broke. The reads wait long
    # enough for all 300 appends on a loaded machine (the last reader's event comes after
    # the 299 before it), on a reader built as the service builds it for such a wait.
    wait = 60.0
    log = RedisEventLog(
        redis.Redis.from_url(redis_url), reader=blocking_reader(redis_url, longest_block=wait)
    )
    operators = range(1, 301)
    readers = [asyncio.create_task(log.read(operator, 0, wait=wait)) for operator in operators]
    for operator in operators:  # from a thread, as the lifecycle does: the reads run meanwhile
        await asyncio.to_thread(log.append, operator, _task(operator))
    batches = await asyncio.wait_for(asyncio.gather(*readers), wait * 2)
    assert [
        [e.frame.task_id for e in b.events if isinstance(e.frame, TaskFrame)] for b in batches
    ] == [[o] for o in operators]
    await log.close()
    log.client.close()


async def test_a_stream_connecting_while_the_loop_is_busy_past_5_s_still_reads(
    redis_url: str,
) -> None:
    # On a loaded host a burst of streams (re)connecting at once keeps the event loop from
    # getting back to a connect the kernel finished at once; redis-py's 5 s connect timeout,
    # timed on the loop, then broke the stream ("Timeout connecting to server"). Here the
    # loop is held 6 s right after the read's connect started (its first suspension).
    log = RedisEventLog.from_url(redis_url)
    try:
        log.append(7, _task(7))
        read = asyncio.create_task(log.read(7, 0, wait=1))
        asyncio.get_running_loop().call_soon(time.sleep, 6.0)  # runs after the read's first step
        batch = await asyncio.wait_for(read, 60)
        assert [e.frame.task_id for e in batch.events if isinstance(e.frame, TaskFrame)] == [7]
    finally:
        await log.close()
        log.client.close()


@dataclass
class RedisOutage:
    """Operator events on a Redis of their own, already stopped; `restart` starts an empty
    one on the same port (as after a restart without persistence)."""

    events: OperatorEvents
    log: RedisEventLog
    db: Any
    port: int
    folder: Path
    again: EmbeddedRedis | None = None

    def restart(self) -> None:
        self.again = start_redis_at(self.folder / "after", self.port)


@pytest.fixture
async def redis_outage(
    tmp_path: Path, services_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[RedisOutage]:
    monkeypatch.setattr(publisher, "APPEND_BACKOFF_SECONDS", 0.0)
    db = services_factory(make_settings(tmp_path)).db
    port = restartable_port()  # `restart` comes back on it, where the log's clients point
    before = start_redis_at(tmp_path / "before", port)
    log = RedisEventLog(
        redis.Redis.from_url(before.url, socket_timeout=PATIENCE_SECONDS),
        reader=aioredis.Redis.from_url(before.url, socket_timeout=PATIENCE_SECONDS),
    )
    outage = RedisOutage(OperatorEvents(log, db), log, db, port, tmp_path)
    before.stop()
    yield outage
    if outage.again is not None:
        outage.again.stop()
    log.client.close()
    await log.close()


async def test_operators_who_missed_events_while_redis_was_down_are_told_to_reload(
    redis_outage: RedisOutage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(publisher, "RESYNC_BACKOFF_SECONDS", 0.1)
    events = redis_outage.events

    def two_operators(session: Any) -> list[int]:
        made = [create_operator(session, name)[0] for name in ("ada", "bo")]
        session.flush()
        return [operator.id for operator in made]

    ada, bo = redis_outage.db.call(two_operators)
    # Ada's session event is dropped; then a task change whose readers were unknown.
    await asyncio.to_thread(events.session_changed, ada, "s-1", SessionChange.UPDATED)
    await asyncio.to_thread(events.missed, None)
    redis_outage.restart()
    for operator_id in (ada, bo):
        told = await _events_once_there(redis_outage.log, operator_id)
        assert told and {event.type for event in told} == {"resync"}
        assert told[0].frame == ResyncFrame(id=told[0].id, reason="events were missed")


async def _events_once_there(log: RedisEventLog, operator_id: int) -> list[Any]:
    """The operator's events, waiting (in blocking reads) up to PATIENCE_SECONDS for the
    first (the publisher pays what it owes on its own retries, RESYNC_BACKOFF_SECONDS apart)."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.ConnectionError):
            batch = await log.read(operator_id, 0, wait=0.5)
            if batch.events:
                return batch.events
    return []


async def test_a_process_about_to_exit_pays_what_it_owes_and_a_forked_child_owes_nothing(
    redis_outage: RedisOutage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A forked RQ work horse exits right after its job (its timer threads die with it), so
    # the worker appends what the job's events still owe first (`settle_owed`).
    monkeypatch.setattr(publisher, "RESYNC_BACKOFF_SECONDS", 3600.0)  # only settle_owed pays
    events = redis_outage.events
    await asyncio.to_thread(events.session_changed, 5, "s-1", SessionChange.UPDATED)
    await asyncio.to_thread(publisher.settle_owed, 0.2)
    assert events.owes_resyncs  # Redis is still down
    child = os.fork()
    if child == 0:  # the child's copy of the debt is the parent's to pay
        os._exit(1 if events.owes_resyncs else 0)
    _, status = await asyncio.to_thread(os.waitpid, child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    redis_outage.restart()
    # Other tests' services in this process may owe Redis servers long gone: only this
    # one's debt is looked at.
    await asyncio.to_thread(publisher.settle_owed, 2.0)
    assert not events.owes_resyncs
    told = await _events_once_there(redis_outage.log, 5)
    assert [event.type for event in told] == ["resync"]


# A process that owes a resync and dies: the events log is unreachable (nothing listens on
# the URL), so its session event is dropped, and it exits without paying (as a forked work
# horse exits after its job, or a pod is replaced).
_DIES_OWING = """
import os, sys
import redis
from bot.db import Database
from bot.events import OperatorEvents, RedisEventLog, publisher
from bot.events.publisher import SessionChange
publisher.APPEND_BACKOFF_SECONDS = 0.0
database_url, redis_url, operator_id = sys.argv[1], sys.argv[2], int(sys.argv[3])
log = RedisEventLog(redis.Redis.from_url(redis_url, socket_timeout=2))
events = OperatorEvents(log, Database.from_url(database_url))
events.session_changed(operator_id, "s-1", SessionChange.UPDATED)
print("owes", events.owes_resyncs, flush=True)
os._exit(0)
"""


async def test_a_resync_owed_by_a_process_that_died_reaches_its_operator(
    redis_outage: RedisOutage,
) -> None:
    ada, bo = redis_outage.db.call(_two_operators)
    dead = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-c",
            _DIES_OWING,
            str(redis_outage.db.engine.url.render_as_string(hide_password=False)),
            f"redis://127.0.0.1:{redis_outage.port}/0",
            str(ada),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dead.stdout == "owes True\n", dead.stderr
    redis_outage.restart()
    # This process missed nothing itself; what it pays is what the dead one recorded.
    survivor = OperatorEvents(redis_outage.log, redis_outage.db)
    assert not survivor.owes_resyncs
    assert await asyncio.to_thread(survivor.pay_recorded) == {ada}
    told = await _events_once_there(redis_outage.log, ada)
    assert [event.frame for event in told] == [ResyncFrame(id=1, reason=publisher.MISSED.reason)]
    assert await redis_outage.log.last_id(bo) == 0  # bo missed nothing
    assert await asyncio.to_thread(survivor.pay_recorded) == set()  # paid once


async def test_paying_its_own_debt_a_process_pays_the_recorded_ones_once_each(
    redis_outage: RedisOutage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(publisher, "RESYNC_BACKOFF_SECONDS", 3600.0)  # only settle_owed pays
    ada, bo = redis_outage.db.call(_two_operators)
    redis_outage.db.call(publisher._record_owed, [bo], datetime.now(UTC))  # a dead process's
    events = redis_outage.events
    await asyncio.to_thread(events.session_changed, ada, "s-1", SessionChange.UPDATED)
    redis_outage.restart()
    await asyncio.to_thread(publisher.settle_owed, 5.0)
    assert not events.owes_resyncs
    for operator_id in (ada, bo):  # ada's own debt was recorded too: one resync, not two
        told = await _events_once_there(redis_outage.log, operator_id)
        assert [event.type for event in told] == ["resync"]
    assert redis_outage.db.call(publisher._owed_rows) == []


async def test_a_debt_is_recorded_for_each_operator_that_exists(
    redis_outage: RedisOutage,
) -> None:
    ada, bo = redis_outage.db.call(_two_operators)
    await asyncio.to_thread(redis_outage.events.missed, [ada, 999_999, bo])  # one deleted since
    recorded = redis_outage.db.call(publisher._owed_rows)
    assert sorted(operator_id for _, operator_id in recorded) == [ada, bo]


class _UnreachableLog(LocalEventLog):
    def append(self, operator_id: int, frame: EventFrame) -> int:
        raise redis.ConnectionError("the events log is down")


def test_owed_resyncs_are_recorded_paid_and_forgotten_on_each_database(
    any_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(publisher, "APPEND_BACKOFF_SECONDS", 0.0)
    monkeypatch.setattr(publisher, "RESYNC_BACKOFF_SECONDS", 3600.0)  # no timer pays here
    db = Database.from_url(any_db_url)
    try:
        dbmod.upgrade(db.engine)
        ada, bo = db.call(_two_operators)
        down = OperatorEvents(_UnreachableLog(), db)
        down.session_changed(ada, "s-1", SessionChange.UPDATED)
        down.missed([bo, 999_999])
        first = db.call(publisher._owed_rows)
        assert sorted(operator_id for _, operator_id in first) == [ada, bo]
        log = LocalEventLog()
        assert OperatorEvents(log, db).pay_recorded() == {ada, bo}
        assert db.call(publisher._owed_rows) == []
        for operator_id in (ada, bo):
            assert asyncio.run(log.read(operator_id, 0, wait=0)).events[0].type == "resync"
        down.missed([ada])  # a new miss never takes the id of a row already paid
        [(row_id, _)] = db.call(publisher._owed_rows)
        assert row_id > max(row_id for row_id, _ in first)
    finally:
        db.dispose()


async def test_the_reconciler_pays_resyncs_that_dead_processes_owed(make: Make) -> None:
    lc = await make()
    operator_id = lc.ctx.db.call(lambda session: session.scalar(select(Operator.id)))
    lc.ctx.db.call(publisher._record_owed, [operator_id], datetime.now(UTC))
    feed = await EventsFeed.open(lc.api)
    try:
        with lock_bounded(lc.ctx) as periodic:
            report = await asyncio.to_thread(run_reconcile, periodic, say=lambda line: None)
        assert report.resyncs_paid == 1, report.lines()
        assert "operators told to reload after missed events: 1" in report.lines()
        resync = await feed.wait_for(lambda frame: frame["type"] == "resync")
        assert resync["reason"] == publisher.MISSED.reason
    finally:
        await feed.close()
    assert lc.ctx.db.call(publisher._owed_rows) == []


def _two_operators(session: Any) -> list[int]:
    made = [create_operator(session, name)[0] for name in ("ada", "bo")]
    session.flush()
    return [operator.id for operator in made]


def _session(n: int, id: int = 0) -> SessionFrame:
    return SessionFrame(id=id, session_id=f"s-{n}", change=SessionChange.UPDATED)


def _task(task_id: int, id: int = 0) -> TaskFrame:
    return TaskFrame(
        id=id,
        task_id=task_id,
        repo="o/r",
        issue=task_id,
        title="t",
        state="queued",
        pr_url=None,
        cost_usd=0.0,
        tokens=0,
        reason="",
        updated_at="2026-01-01T00:00:00+00:00",
        pr_state=None,
        review=LedgerCounts(open=0, addressed=0, declined=0, needs_operator=0, summary=""),
        ready_for_review=False,
        question=None,
    )
