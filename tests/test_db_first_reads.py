"""`Database.run_first`: the reads a request waits on before it can answer (who is asking,
which session) run on threads of their own, so background work that fills the shared pool
(retrieval, batched writes) cannot hold back a request's first byte."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from bot.db import Database, upgrade
from bot.operators import authenticate, create_operator


@pytest.fixture
def db(any_db_url: str) -> Iterator[Database]:
    database = Database.from_url(any_db_url)
    upgrade(database.engine)
    yield database
    database.dispose()


async def test_a_first_read_completes_while_background_work_holds_every_pool_thread(
    db: Database,
) -> None:
    operator, token = db.call(create_operator, "ada")
    release = threading.Event()
    # More blocked jobs than the default pool has threads: everything behind them waits.
    blockers = [asyncio.to_thread(release.wait, 30) for _ in range(40)]
    background = asyncio.gather(*blockers)
    try:
        queued = asyncio.ensure_future(db.run(authenticate, token))
        first = await asyncio.wait_for(db.run_first(authenticate, token), timeout=20)
        assert (first.id, first.name) == (operator.id, "ada")
        # The same read on the shared pool is still queued behind the background work.
        assert not queued.done()
    finally:
        release.set()
        await background
    assert (await queued).id == operator.id
