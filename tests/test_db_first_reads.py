"""`Database.run_first`: the reads a request waits on before it can answer (who is asking,
which session) run on threads of their own, so background work that fills the shared pool
(retrieval, batched writes) cannot hold back a request's first byte."""

from __future__ import annotations

import asyncio
import threading

from bot.db import Database
from bot.operators import authenticate, create_operator
from tests.fakes.patience import PATIENCE_SECONDS


async def test_a_first_read_completes_while_background_work_holds_every_pool_thread(
    any_db: Database,
) -> None:
    operator, token = any_db.call(create_operator, "ada")
    release = threading.Event()
    # More blocked jobs than the default pool has threads: everything behind them waits.
    # They hold their threads until released (their own bound only keeps a failed test from
    # leaving them behind for good): the first read cannot complete by their running out.
    blockers = [asyncio.to_thread(release.wait, 10 * PATIENCE_SECONDS) for _ in range(40)]
    background = asyncio.gather(*blockers)
    try:
        queued = asyncio.ensure_future(any_db.run(authenticate, token))
        first = await asyncio.wait_for(
            any_db.run_first(authenticate, token), timeout=PATIENCE_SECONDS
        )
        assert (first.id, first.name) == (operator.id, "ada")
        # The same read on the shared pool is still queued behind the background work.
        assert not queued.done()
    finally:
        release.set()
        await background
    assert (await queued).id == operator.id
