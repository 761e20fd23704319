"""Group commit (bot.group_commit) on SQLite and PostgreSQL: concurrent writes share
transactions, a failing write fails alone, a cancelled caller's write still lands."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.chat.placement import TurnTarget
from bot.chat.proposals import Proposal
from bot.chat.session_rows import UNSET
from bot.chat.session_store import open_for_turn, persist_turn
from bot.chat.turn_record import TurnRecord
from bot.clock import utcnow
from bot.db import Database, upgrade
from bot.errors import Conflict
from bot.group_commit import GroupCommit
from bot.models import Agent, ChatSession, Operator
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


async def test_a_turn_opened_after_one_stored_in_the_same_batch_reads_what_it_stored(
    db: Database,
) -> None:
    """Writes of one batch share an ORM session: a session row an earlier write loaded (and
    something still holds) must not hide what the plain UPDATE of `persist_turn` changed."""

    def setup(session: Session) -> int:
        agent = Agent(name="default", repo="o/r", checkout="/", runtime="x", updated_at=utcnow())
        session.add(agent)
        operator, _ = create_operator(session, "ada")
        session.flush()
        open_for_turn(session, operator.id, TurnTarget("s1", "default", exists=False, pin=False))
        return operator.id

    held: list[ChatSession] = []

    def load(session: Session) -> str | None:
        row = session.get(ChatSession, "s1")
        assert row is not None
        held.append(row)  # kept alive: the identity map holds only what someone references
        return row.pending_title

    operator_id = db.call(setup)
    again = TurnTarget("s1", "default", exists=True, pin=False, focus=UNSET)
    proposal = Proposal(title="Fix the flaky deploy", body="why", kind="work", key="k1")
    record = TurnRecord("t1", "hi", "hello", "", "chat", {}, title="Deploys", pending=proposal)
    writes = GroupCommit(db)
    before, stored, after = await asyncio.gather(
        writes.run(load),
        writes.run(persist_turn, operator_id, "s1", record),
        writes.run(open_for_turn, operator_id, again),
    )
    assert writes.batches == 1
    assert before is None
    assert [m.content for m in stored.messages] == ["hi", "hello"]
    assert after.pending == proposal and after.title == "Deploys"
    assert [m.content for m in after.history] == ["hi", "hello"]
