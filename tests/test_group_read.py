"""Group reads (bot.group_read) on SQLite and PostgreSQL: concurrent questions of one kind
share statements, each caller gets its own answer, a failure reaches every caller of its
batch and no later one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

from sqlalchemy.orm import Session

from bot.chat.placement import Placement, placements
from bot.chat.session_store import new_session
from bot.clock import utcnow
from bot.db import Database
from bot.group_read import GroupRead
from bot.models import Agent
from bot.operators import Identity, create_operator, hash_token, identities
from tests.fakes.patience import PATIENCE_SECONDS


async def test_concurrent_lookups_share_statements_and_each_gets_its_own_answer(
    any_db: Database,
) -> None:
    made = [any_db.call(create_operator, f"op{i}") for i in range(60)]
    reads = GroupRead(any_db, identities)
    wrong = [hash_token(f"not-a-token-{i}") for i in range(5)]
    asked = [hash_token(token) for _, token in made] + wrong
    answers = await asyncio.gather(*(reads.get(digest) for digest in asked))
    assert answers[: len(made)] == [Identity(op.id, op.name) for op, _ in made]
    assert answers[len(made) :] == [None] * len(wrong)
    assert reads.batches < len(asked) / 4  # 65 questions, a few statements


async def test_the_same_key_asked_twice_at_once_is_answered_for_both(any_db: Database) -> None:
    operator, token = any_db.call(create_operator, "ada")
    reads = GroupRead(any_db, identities)
    both = await asyncio.gather(reads.get(hash_token(token)), reads.get(hash_token(token)))
    assert both == [Identity(operator.id, "ada")] * 2


async def test_a_failing_batch_fails_its_callers_and_the_next_batch_answers(
    any_db: Database,
) -> None:
    operator, token = any_db.call(create_operator, "ada")
    failing = True

    def flaky(session: Session, keys: Sequence[str]) -> dict[str, Identity]:
        if failing:
            raise ConnectionError("database went away")
        return identities(session, keys)

    reads = GroupRead(any_db, flaky)
    results = await asyncio.gather(
        *(reads.get(hash_token(token)) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, ConnectionError) for r in results)
    failing = False
    assert await reads.get(hash_token(token)) == Identity(operator.id, "ada")


async def test_a_cancelled_caller_leaves_its_batch_to_answer_the_others(any_db: Database) -> None:
    operator, token = any_db.call(create_operator, "ada")
    started, release = threading.Event(), threading.Event()

    def held(session: Session, keys: Sequence[str]) -> dict[str, Identity]:
        started.set()
        release.wait(10 * PATIENCE_SECONDS)  # set by the test; the bound only against a hang
        return identities(session, keys)

    reads = GroupRead(any_db, held)
    cancelled = asyncio.ensure_future(reads.get(hash_token(token)))
    kept = asyncio.ensure_future(reads.get(hash_token(token)))
    assert await asyncio.to_thread(started.wait, PATIENCE_SECONDS)  # both are in the batch
    cancelled.cancel()
    release.set()
    assert await kept == Identity(operator.id, "ada")
    assert cancelled.cancelled()


async def test_placements_name_a_new_active_named_or_missing_session(any_db: Database) -> None:
    def agent(session: Session) -> None:
        session.add(
            Agent(name="default", repo="o/r", checkout="/", runtime="x", updated_at=utcnow())
        )

    any_db.call(agent)
    ada, _ = any_db.call(create_operator, "ada")
    bob, _ = any_db.call(create_operator, "bob")
    ada_session, _ = any_db.call(new_session, ada.id, agent="default")
    missing_operator = 10_000
    keys = [
        (ada.id, None),
        (bob.id, None),
        (ada.id, ada_session.id),
        (bob.id, ada_session.id),
        (missing_operator, None),
    ]
    found = any_db.call(placements, keys)
    assert found[(ada.id, None)] == Placement(ada_session.id, "default")
    assert found[(bob.id, None)] == Placement(None, None)  # no active session: a new one
    assert found[(ada.id, ada_session.id)] == Placement(ada_session.id, "default")
    # Another operator's session is not bob's: bob exists, the session does not for him.
    assert found[(bob.id, ada_session.id)] == Placement(None, None)
    assert (missing_operator, None) not in found
