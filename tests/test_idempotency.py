"""Side effects once per key: double clicks, retries, errors after the effect, both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot import db as dbmod
from bot.decisions import DECISION_MARKER, decision_comment, publish_key
from bot.errors import BadRequest, UpstreamError
from bot.idempotency import run_once


@pytest.fixture
def database(any_db_url: str) -> Any:
    database = dbmod.Database.from_url(any_db_url)
    dbmod.upgrade(database.engine)
    yield database
    database.dispose()


class Remote:
    """A stand-in for the external system: records effects, can fail after acting."""

    def __init__(self) -> None:
        self.effects: list[dict[str, Any]] = []
        self.fail_after_next = False
        self.delay = 0.0

    async def perform(self, request: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(self.delay)
        self.effects.append(request)
        if self.fail_after_next:
            self.fail_after_next = False
            raise UpstreamError("502 from upstream")
        return {"id": len(self.effects)}

    async def reconcile(self, request: dict[str, Any]) -> dict[str, Any] | None:
        for index, effect in enumerate(self.effects, start=1):
            if effect == request:
                return {"id": index}
        return None


async def test_concurrent_double_click_acts_once(database: Any) -> None:
    remote = Remote()
    remote.delay = 0.1

    async def click() -> Any:
        return await run_once(
            database,
            key="k1",
            kind="t",
            request={"x": 1},
            perform=remote.perform,
            reconcile=remote.reconcile,
        )

    first, second = await asyncio.gather(click(), click())
    assert len(remote.effects) == 1
    assert first.result == second.result == {"id": 1}
    assert sorted([first.reused, second.reused]) == [False, True]


async def test_retry_after_completion_returns_the_stored_result(database: Any) -> None:
    remote = Remote()
    for _ in range(3):
        outcome = await run_once(
            database,
            key="k2",
            kind="t",
            request={"x": 2},
            perform=remote.perform,
            reconcile=remote.reconcile,
        )
        assert outcome.result == {"id": 1}
    assert len(remote.effects) == 1


async def test_error_after_the_effect_is_reconciled_not_repeated(database: Any) -> None:
    remote = Remote()
    remote.fail_after_next = True
    outcome = await run_once(
        database,
        key="k3",
        kind="t",
        request={"x": 3},
        perform=remote.perform,
        reconcile=remote.reconcile,
    )
    assert outcome.result == {"id": 1} and len(remote.effects) == 1


async def test_failure_without_effect_releases_the_key_for_a_retry(database: Any) -> None:
    calls = 0

    async def flaky(request: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise UpstreamError("connection reset")
        return {"ok": calls}

    async def nothing(request: dict[str, Any]) -> None:
        return None

    with pytest.raises(UpstreamError):
        await run_once(database, key="k4", kind="t", request={}, perform=flaky, reconcile=nothing)
    outcome = await run_once(
        database, key="k4", kind="t", request={}, perform=flaky, reconcile=nothing
    )
    assert outcome.result == {"ok": 2}


async def test_crash_mid_effect_is_recovered_after_the_lease(database: Any) -> None:
    """A process claimed the key, acted, and died before recording it: once its lease has
    expired the next caller takes over and finds the effect instead of repeating it."""
    from datetime import timedelta

    from bot.clock import utcnow
    from bot.idempotency import _claim

    remote = Remote()
    claim = database.call(_claim, "k5", "t", {"x": 5}, timedelta(seconds=-1), utcnow)
    assert claim.owner
    remote.effects.append({"x": 5})  # the dead process's effect
    outcome = await run_once(
        database,
        key="k5",
        kind="t",
        request={"x": 5},
        perform=remote.perform,
        reconcile=remote.reconcile,
    )
    assert outcome.result == {"id": 1} and outcome.reused and len(remote.effects) == 1


async def test_live_lease_makes_a_second_caller_wait_then_conflict(database: Any) -> None:
    from datetime import timedelta

    from bot.clock import utcnow
    from bot.errors import Conflict
    from bot.idempotency import _claim

    database.call(_claim, "k6", "t", {}, timedelta(minutes=5), utcnow)
    remote = Remote()
    with pytest.raises(Conflict):
        await run_once(
            database,
            key="k6",
            kind="t",
            request={},
            perform=remote.perform,
            reconcile=remote.reconcile,
            wait_seconds=0.2,
        )
    assert remote.effects == []


def test_decision_comment_has_the_marker_exactly_once() -> None:
    pasted = f"{DECISION_MARKER}\nShip it.\n<!--steelframe-decision-->"
    comment = decision_comment(pasted, "abc")
    assert comment.count("steelframe-decision") == 1
    assert comment.startswith(DECISION_MARKER) and "Ship it." in comment
    # keyed by the client's key, never by the text
    assert publish_key(1, "o/r", 1, "k1") == publish_key(1, "o/r", 1, "k1")
    assert publish_key(1, "o/r", 1, "k1") != publish_key(2, "o/r", 1, "k1")
    assert publish_key(1, "o/r", 1, None) != publish_key(1, "o/r", 1, None)
    with pytest.raises(BadRequest):
        decision_comment(f"  {DECISION_MARKER} ", "abc")
