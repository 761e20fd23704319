"""Group commit (bot.group_commit) on SQLite and PostgreSQL: concurrent writes share
transactions, a failing write fails alone, a cancelled caller's write still lands."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.db import Database, upgrade
from bot.errors import Conflict
from bot.group_commit import GroupCommit
from bot.models import Operator
from bot.operators import create_operator


@pytest.fixture
def db(any_db_url: str) -> Iterator[Database]:
    database = Database.from_url(any_db_url)
    upgrade(database.engine)
    yield database
    database.dispose()


def _names(db: Database) -> set[str]:
    return set(db.call(lambda s: s.scalars(select(Operator.name)).all()))


def _named(session: Session, name: str) -> str:
    operator, _ = create_operator(session, name)
    return operator.name


async def test_concurrent_writes_commit_in_fewer_transactions(db: Database) -> None:
    writes = GroupCommit(db)
    names = [f"operator-{i}" for i in range(40)]
    stored = await asyncio.gather(*(writes.run(_named, name) for name in names))
    assert stored == names
    assert _names(db) == set(names)
    assert writes.batches < len(names)  # queued while one committed, they went together


async def test_a_failing_write_fails_alone_and_its_neighbours_commit(db: Database) -> None:
    writes = GroupCommit(db)
    names = ["first", "twice", "middle", "twice", "last"]
    outcomes = await asyncio.gather(
        *(writes.run(_named, name) for name in names), return_exceptions=True
    )
    assert [type(o).__name__ for o in outcomes].count("Conflict") == 1
    assert isinstance(outcomes[3], Conflict)  # the second "twice" is the one refused
    assert _names(db) == {"first", "twice", "middle", "last"}


async def test_a_write_whose_caller_is_cancelled_still_commits(db: Database) -> None:
    writes = GroupCommit(db)
    caller = asyncio.create_task(writes.run(_named, "kept"))
    await asyncio.sleep(0)  # queued
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await writes.close()
    assert _names(db) == {"kept"}
