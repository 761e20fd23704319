"""The operator's answer to a terminate is what is true: a request that is recorded is said to
be recorded and to be applied (202, as when a frozen worker holds the task's row), even when
the database goes away right after recording it; a request that could not be recorded is a
clear 503 with nothing recorded.

The database goes away for real: once armed, every pooled connection is dropped as dead
(SQLAlchemy's `DisconnectionError` from a checkout, as a failed ping would) and every new
one is pointed where no database is (a closed port for PostgreSQL, a folder where the SQLite
file would be), so the driver itself fails to connect."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

from bot.lifecycle import terminate
from bot.lifecycle.reconcile import run_reconcile
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


@pytest.fixture(params=["sqlite", "postgres"])
def bench_db(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "sqlite":
        return {}
    return {"database_url": str(request.getfixturevalue("pg_url"))}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Outage:
    """The engine's database goes away once a statement matching `after` has run and its
    connection is back in the pool (its transaction committed), until `end()`."""

    def __init__(self, engine: Engine, nowhere: Path, *, after: str) -> None:
        self.engine, self.after = engine, after
        self.seen = self.away = False
        self.nowhere, self.port = str(nowhere), _closed_port()
        self._hooks: list[tuple[Any, str, Any]] = [
            (engine, "after_cursor_execute", self._statement),
            (engine.pool, "checkin", self._checkin),
            (engine.pool, "checkout", self._checkout),
            (engine, "do_connect", self._connect),
        ]
        for target, name, hook in self._hooks:
            event.listen(target, name, hook)

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if " ".join(statement.split()).upper().startswith(self.after):
            self.seen = True

    def _checkin(self, *_args: Any) -> None:
        if self.seen:
            self.away = True

    def _checkout(self, *_args: Any) -> None:
        if self.away:
            raise DisconnectionError("the database went away")

    def _connect(
        self, _dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]
    ) -> None:
        if self.away:
            if self.engine.dialect.name == "sqlite":
                cargs[0] = self.nowhere
            else:
                cparams["port"] = self.port

    def end(self) -> None:
        self.away = self.seen = False
        for target, name, hook in self._hooks:
            event.remove(target, name, hook)


async def _running(lc: Lifecycle) -> int:
    issue = await lc.open_issue("Make the widget blue")
    task_id = lc.task(issue).id
    lc.ctx.db.call(apply, task_id, Move(TaskState.RUNNING, actor="worker:test"))
    return task_id


async def _terminate_across_outage(
    lc: Lifecycle, task_id: int, nowhere: Path, *, after: str
) -> Any:
    """The operator's terminate, the database going away once a statement matching `after`
    has run (and back once the answer is in)."""
    outage = Outage(lc.api.services.db.engine, nowhere, after=after)
    try:
        response = await lc.api.post(f"/api/operator/tasks/{task_id}/terminate")
        assert outage.away, "the database never went away"
    finally:
        outage.end()
    return response


async def test_a_terminate_whose_database_goes_away_once_recorded_answers_recorded(
    make: Make, bench_db: dict[str, str], tmp_path: Path
) -> None:
    lc = await make(**bench_db)
    task_id = await _running(lc)
    response = await _terminate_across_outage(
        lc, task_id, tmp_path, after="INSERT INTO TASK_STOP_REQUESTS"
    )
    body = await response.json()
    assert response.status == 202, body  # recorded, to be applied: not a failure
    assert body["id"] == task_id and body["state"] == TaskState.RUNNING
    ((recorded, actor),) = lc.ctx.db.call(terminate.pending)
    assert recorded == task_id and actor.startswith("operator:")
    # Once the database is back, the reconciler applies it.
    report = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert report.terminated == [task_id]
    ended = lc.events(task_id)[-1]
    assert (ended.to_state, ended.actor) == (TaskState.TERMINATED, actor)
    assert lc.ctx.db.call(terminate.pending) == []


async def test_a_terminate_that_cannot_record_its_request_is_a_503_and_records_nothing(
    make: Make, bench_db: dict[str, str], tmp_path: Path
) -> None:
    """The database goes away after the terminate read the task, before the request."""
    lc = await make(**bench_db)
    task_id = await _running(lc)
    response = await _terminate_across_outage(lc, task_id, tmp_path, after="SELECT TASKS.ID")
    body = await response.json()
    assert response.status == 503, body
    assert body["code"] == "database_unavailable" and response.headers["Retry-After"] == "5"
    assert lc.ctx.db.call(terminate.pending) == []
    assert lc.events(task_id)[-1].to_state == TaskState.RUNNING  # nothing changed
