"""Side effects once per key: double clicks, retries, errors after the effect, both backends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from sqlalchemy import select, text, update

from bot import db as dbmod
from bot.decisions import DECISION_MARKER, decision_comment, publish_key
from bot.errors import BadRequest, UpstreamError
from bot.idempotency import EffectKind, SideEffect, expire_all, run_once
from tests.fakes.lifecycle import wait_for
from tests.fakes.patience import PATIENCE_SECONDS


@pytest.fixture
def database(any_db_url: str) -> Any:
    database = dbmod.Database.from_url(any_db_url)
    dbmod.upgrade(database.engine)
    yield database
    database.dispose()


class Effect(msgspec.Struct, frozen=True):
    """A request of the stand-in's kind, typed as the service's callers type theirs."""

    x: int = 0


class EffectRef(msgspec.Struct, frozen=True):
    """What the stand-in answers: which of its effects it was."""

    id: int


class Remote:
    """A stand-in for the external system: records effects, can fail after acting."""

    def __init__(self) -> None:
        self.effects: list[Effect] = []
        self.fail_after_next = False
        self.delay = 0.0

    async def perform(self, request: Effect) -> EffectRef:
        await asyncio.sleep(self.delay)
        self.effects.append(request)
        if self.fail_after_next:
            self.fail_after_next = False
            raise UpstreamError("502 from upstream")
        return EffectRef(id=len(self.effects))

    async def reconcile(self, request: Effect) -> EffectRef | None:
        for index, effect in enumerate(self.effects, start=1):
            if effect == request:
                return EffectRef(id=index)
        return None


async def test_concurrent_double_click_acts_once(database: Any) -> None:
    remote = Remote()
    remote.delay = 0.1

    async def click() -> Any:
        return await run_once(
            database,
            key="k1",
            kind="t",
            request=Effect(x=1),
            perform=remote.perform,
            reconcile=remote.reconcile,
            result_type=EffectRef,
            check_stored=None,
        )

    first, second = await asyncio.gather(click(), click())
    assert len(remote.effects) == 1
    assert first.result == second.result == EffectRef(id=1)
    assert sorted([first.reused, second.reused]) == [False, True]


async def test_retry_after_completion_returns_the_stored_result(database: Any) -> None:
    remote = Remote()
    for _ in range(3):
        outcome = await run_once(
            database,
            key="k2",
            kind="t",
            request=Effect(x=2),
            perform=remote.perform,
            reconcile=remote.reconcile,
            result_type=EffectRef,
            check_stored=None,
        )
        assert outcome.result == EffectRef(id=1)
    assert len(remote.effects) == 1


async def test_error_after_the_effect_is_reconciled_not_repeated(database: Any) -> None:
    remote = Remote()
    remote.fail_after_next = True
    outcome = await run_once(
        database,
        key="k3",
        kind="t",
        request=Effect(x=3),
        perform=remote.perform,
        reconcile=remote.reconcile,
        result_type=EffectRef,
        check_stored=None,
    )
    assert outcome.result == EffectRef(id=1) and len(remote.effects) == 1


async def test_failure_without_effect_releases_the_key_for_a_retry(database: Any) -> None:
    calls = 0

    async def flaky(request: Effect) -> EffectRef:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise UpstreamError("connection reset")
        return EffectRef(id=calls)

    async def nothing(request: Effect) -> None:
        return None

    def attempt() -> Any:
        return run_once(
            database,
            key="k4",
            kind="t",
            request=Effect(),
            perform=flaky,
            reconcile=nothing,
            result_type=EffectRef,
            check_stored=None,
        )

    with pytest.raises(UpstreamError):
        await attempt()
    outcome = await attempt()
    assert outcome.result == EffectRef(id=2)


def _row(session: Any, key: str) -> tuple[str, Any, Any]:
    from sqlalchemy import select

    from bot.idempotency import SideEffect

    row = session.scalar(select(SideEffect).where(SideEffect.key == key))
    return row.status, row.request, row.lease_until


@pytest.mark.parametrize("state", ["done", "running", "failed"])
async def test_a_key_used_for_another_request_is_refused_and_nothing_changes(
    database: Any, state: str
) -> None:
    """One request per key, whatever became of the key's first: another request under it is
    KeyReused (422) before anything is claimed or done; the key's own request is not."""
    from datetime import timedelta

    from bot.clock import utcnow
    from bot.idempotency import DEFAULT_LEASE, KeyReused, _claim, _complete, check_same_request

    key = f"k-{state}"
    first = {"x": 1}
    lease = DEFAULT_LEASE if state == "running" else timedelta(seconds=-1)
    database.call(_claim, key, "t", first, lease, utcnow)
    if state == "done":
        database.call(_complete, key, {"id": 1}, utcnow)
    before = database.call(_row, key)
    remote = Remote()

    def attempt(request: Effect) -> Any:
        def same(stored: Effect) -> None:
            check_same_request(stored, request, what="effect")

        return run_once(
            database,
            key=key,
            kind="t",
            request=request,
            perform=remote.perform,
            reconcile=remote.reconcile,
            result_type=EffectRef,
            check_stored=same,
            wait_seconds=0.2,
        )

    with pytest.raises(KeyReused) as refused:
        await attempt(Effect(x=2))
    assert refused.value.status == 422 and "another effect" in refused.value.message
    assert remote.effects == [] and database.call(_row, key) == before
    if state != "running":
        outcome = await attempt(Effect(x=1))
        assert outcome.result == EffectRef(id=1)
        assert remote.effects == ([] if state == "done" else [Effect(x=1)])


async def test_a_retry_after_a_failure_without_effect_performs_its_own_request(
    database: Any,
) -> None:
    """An attempt that failed with no effect holds no result: the next request under the key
    (one the caller's check lets through: here any) looks for the failed attempt's effect,
    finds none, and does what it asks itself, which the key stores from then on."""
    remote = Remote()
    looked_for: list[Effect] = []

    async def refused(request: Effect) -> EffectRef:
        raise UpstreamError("403 rate limited: nothing done")

    async def reconcile(request: Effect) -> EffectRef | None:
        looked_for.append(request)
        return await remote.reconcile(request)

    async def attempt(request: Effect, perform: Any) -> Any:
        return await run_once(
            database,
            key="k-own",
            kind="t",
            request=request,
            perform=perform,
            reconcile=reconcile,
            result_type=EffectRef,
            check_stored=None,
        )

    with pytest.raises(UpstreamError):
        await attempt(Effect(x=1), refused)
    outcome = await attempt(Effect(x=2), remote.perform)
    assert remote.effects == [Effect(x=2)] and outcome.result == EffectRef(id=1)
    assert looked_for == [Effect(x=1), Effect(x=1)]  # after the failure; before the retry acts
    status, request, _ = database.call(_row, "k-own")
    assert status == "done" and request == {"x": 2}


async def test_crash_mid_effect_is_recovered_after_the_lease(database: Any) -> None:
    """A process claimed the key, acted, and died before recording it: once its lease has
    expired the next caller takes over and finds the effect instead of repeating it."""
    from datetime import timedelta

    from bot.clock import utcnow
    from bot.idempotency import _claim

    remote = Remote()
    claim = database.call(_claim, "k5", "t", {"x": 5}, timedelta(seconds=-1), utcnow)
    assert claim.owner
    remote.effects.append(Effect(x=5))  # the dead process's effect
    outcome = await run_once(
        database,
        key="k5",
        kind="t",
        request=Effect(x=5),
        perform=remote.perform,
        reconcile=remote.reconcile,
        result_type=EffectRef,
        check_stored=None,
    )
    assert outcome.result == EffectRef(id=1) and outcome.reused and len(remote.effects) == 1


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
            request=Effect(),
            perform=remote.perform,
            reconcile=remote.reconcile,
            result_type=EffectRef,
            check_stored=None,
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


# Typed records: what filing and publishing store, and rows the dict-based code wrote before.

OLD_FILING_REQUEST = (
    '{"repo": "o/r", "title": "Add a cache", "body": "Red.\\n\\n'
    '<!-- steelframe-filing:a6ec5584667e7932047fda4e609e670cce579c37 -->", '
    '"labels": ["steelframe:work-on-this", "steelframe:from-api"]}'
)
OLD_FILING_RESULT = '{"number": 7, "url": "https://github.com/o/r/issues/7"}'
OLD_PUBLISH_REQUEST = '{"repo": "o/r", "issue": 7, "body": "<!-- steelframe-decision -->\\nGo."}'
OLD_PUBLISH_RESULT = (
    '{"comment_id": 100011, "comment_url": "https://github.com/o/r/issues/7#issuecomment-100011"}'
)


def _stored_row(
    session: Any, key: str, kind: str, status: str, request: str, result: str | None
) -> None:
    """A row as the code before typed records wrote it: the JSON text, key order included."""
    from datetime import datetime

    from sqlalchemy import text

    session.execute(
        text(
            "INSERT INTO side_effects (key, kind, status, request, result, lease_until,"
            " created_at, updated_at) VALUES (:key, :kind, :status, :request, :result, NULL,"
            " :now, :now)"
        ),
        {
            "key": key,
            "kind": kind,
            "status": status,
            "request": request,
            "result": result,
            "now": datetime(2026, 12, 1),
        },
    )


def _stored_text(session: Any, key: str) -> tuple[str, str | None]:
    from sqlalchemy import text

    row = session.execute(
        text("SELECT CAST(request AS TEXT), CAST(result AS TEXT) FROM side_effects WHERE key = :k"),
        {"k": key},
    ).one()
    return row[0], row[1]


async def _never(request: Any) -> Any:
    raise AssertionError(f"acted again on {request!r}")


async def test_rows_stored_as_dicts_read_back_as_the_typed_records(database: Any) -> None:
    from bot.decisions import CommentRef, CommentRequest
    from bot.filing import IssueRef, IssueRequest

    database.call(
        _stored_row, "filing:old", "file_issue", "done", OLD_FILING_REQUEST, OLD_FILING_RESULT
    )
    database.call(
        _stored_row,
        "publish:old",
        "publish_decision",
        "done",
        OLD_PUBLISH_REQUEST,
        OLD_PUBLISH_RESULT,
    )
    filed = await run_once(
        database,
        key="filing:old",
        kind="file_issue",
        request=IssueRequest(repo="o/r", title="other", body="other", labels=[]),
        perform=_never,
        reconcile=_never,
        result_type=IssueRef,
        check_stored=None,
    )
    assert filed.reused and filed.result == IssueRef(7, "https://github.com/o/r/issues/7")
    published = await run_once(
        database,
        key="publish:old",
        kind="publish_decision",
        request=CommentRequest(repo="o/r", issue=7, body="other"),
        perform=_never,
        reconcile=_never,
        result_type=CommentRef,
        check_stored=None,
    )
    assert published.reused
    assert published.result == CommentRef(
        100011, "https://github.com/o/r/issues/7#issuecomment-100011"
    )


async def test_a_crashed_dict_row_gives_reconcile_its_stored_request_typed(database: Any) -> None:
    """A filing the old code claimed and never finished: the next attempt reconciles with the
    request stored then (what that attempt asked), decoded as the typed record."""
    from bot.filing import IssueRef, IssueRequest

    database.call(_stored_row, "filing:crashed", "file_issue", "pending", OLD_FILING_REQUEST, None)
    seen: list[IssueRequest] = []

    async def find(request: IssueRequest) -> IssueRef | None:
        seen.append(request)
        return IssueRef(number=7, url="https://github.com/o/r/issues/7")

    outcome = await run_once(
        database,
        key="filing:crashed",
        kind="file_issue",
        request=IssueRequest(repo="o/r", title="retry", body="retry", labels=[]),
        perform=_never,
        reconcile=find,
        result_type=IssueRef,
        check_stored=None,
    )
    assert outcome.reused and outcome.result.number == 7
    [stored] = seen
    assert stored.title == "Add a cache" and stored.labels[1] == "steelframe:from-api"


async def test_typed_records_store_the_json_the_dicts_stored(database: Any) -> None:
    """The same request and result, once stored as the dicts the old code passed (its claim
    and completion wrote them as they were) and once as the typed records: the columns hold
    the same text, so either code reads the other's rows."""
    import json

    from bot.clock import utcnow
    from bot.decisions import CommentRef, CommentRequest
    from bot.idempotency import DEFAULT_LEASE, _claim, _complete

    request = json.loads(OLD_PUBLISH_REQUEST)
    result = json.loads(OLD_PUBLISH_RESULT)

    async def as_record(req: CommentRequest) -> CommentRef:
        return CommentRef(**result)

    async def nothing(req: CommentRequest) -> None:
        return None

    database.call(_claim, "publish:dict", "publish_decision", request, DEFAULT_LEASE, utcnow)
    database.call(_complete, "publish:dict", result, utcnow)
    typed = await run_once(
        database,
        key="publish:typed",
        kind="publish_decision",
        request=CommentRequest(**request),
        perform=as_record,
        reconcile=nothing,
        result_type=CommentRef,
        check_stored=None,
    )
    assert not typed.reused and typed.result == CommentRef(**result)
    assert database.call(_stored_text, "publish:typed") == database.call(
        _stored_text, "publish:dict"
    )


async def test_completed_reads_the_stored_result_typed(database: Any) -> None:
    from bot.filing import IssueRef
    from bot.idempotency import completed

    database.call(
        _stored_row, "filing:done", "file_issue", "done", OLD_FILING_REQUEST, OLD_FILING_RESULT
    )
    database.call(_stored_row, "filing:pending", "file_issue", "pending", OLD_FILING_REQUEST, None)
    assert database.call(completed, "filing:done", IssueRef) == IssueRef(
        7, "https://github.com/o/r/issues/7"
    )
    assert database.call(completed, "filing:pending", IssueRef) is None
    assert database.call(completed, "filing:missing", IssueRef) is None


async def test_a_stored_result_of_another_shape_is_refused_not_guessed(database: Any) -> None:
    """Unknown is a failure: a row whose result does not decode as the caller's type raises
    instead of answering with made-up fields (and nothing is done again)."""
    from bot.filing import IssueRef, IssueRequest

    database.call(
        _stored_row, "filing:odd", "file_issue", "done", OLD_FILING_REQUEST, OLD_PUBLISH_RESULT
    )
    with pytest.raises(msgspec.ValidationError):
        await run_once(
            database,
            key="filing:odd",
            kind="file_issue",
            request=IssueRequest(repo="o/r", title="t", body="b", labels=[]),
            perform=_never,
            reconcile=_never,
            result_type=IssueRef,
            check_stored=None,
        )


async def test_a_stored_request_of_another_shape_raises_and_frees_the_key(database: Any) -> None:
    """A pending row whose request does not decode as the caller's type: nothing is done,
    the error says so, and the key is not claimed (no lease held until it expires)."""
    from sqlalchemy import text

    from bot.filing import IssueRef, IssueRequest

    database.call(
        _stored_row, "filing:odd-request", "file_issue", "pending", OLD_PUBLISH_REQUEST, None
    )
    with pytest.raises(msgspec.ValidationError):
        await run_once(
            database,
            key="filing:odd-request",
            kind="file_issue",
            request=IssueRequest(repo="o/r", title="t", body="b", labels=[]),
            perform=_never,
            reconcile=_never,
            result_type=IssueRef,
            check_stored=None,
        )
    lease = database.call(
        lambda session: session.execute(
            text("SELECT lease_until FROM side_effects WHERE key = 'filing:odd-request'")
        ).scalar_one()
    )
    assert lease is None


RETENTION = timedelta(days=30)
DAY = timedelta(days=1)
NOW = datetime(2027, 3, 1, tzinfo=UTC)


def _at(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


async def _effect_at(
    database: Any, remote: Remote, key: str, kind: EffectKind, x: int, moment: datetime
) -> Any:
    return await run_once(
        database,
        key=key,
        kind=kind,
        request=Effect(x=x),
        perform=remote.perform,
        reconcile=remote.reconcile,
        result_type=EffectRef,
        check_stored=None,
        clock=_at(moment),
    )


def _keys(session: Any) -> list[str]:
    return sorted(session.scalars(select(SideEffect.key)))


async def test_records_past_the_retention_go_and_a_retry_within_it_still_replays(
    database: Any,
) -> None:
    remote = Remote()
    await _effect_at(database, remote, "filing:old", EffectKind.FILE_ISSUE, 1, NOW - RETENTION * 2)
    await _effect_at(
        database, remote, "publish:old", EffectKind.PUBLISH_DECISION, 2, NOW - RETENTION - DAY
    )
    recent = NOW - RETENTION + DAY
    await _effect_at(database, remote, "publish:recent", EffectKind.PUBLISH_DECISION, 3, recent)
    # A chat turn's key (2026-12-01, as old as the others) lives as long as its session.
    database.call(_stored_row, "turn:old", "chat_turn", "done", '{"x": 0}', '{"id": 9}')
    assert database.call(_keys) == ["filing:old", "publish:old", "publish:recent", "turn:old"]
    removed = expire_all(database, before=NOW - RETENTION, batch=1)  # one row a transaction
    assert removed == 2
    assert database.call(_keys) == ["publish:recent", "turn:old"]
    assert expire_all(database, before=NOW - RETENTION) == 0  # run again: nothing more
    # The client's retry within the window replays the stored result: nothing is done again.
    again = await _effect_at(
        database, remote, "publish:recent", EffectKind.PUBLISH_DECISION, 3, NOW
    )
    assert again.reused and again.result == EffectRef(id=3) and len(remote.effects) == 3
    # Past it, the key names nothing: the request is a new one.
    late = await _effect_at(database, remote, "filing:old", EffectKind.FILE_ISSUE, 1, NOW)
    assert not late.reused and len(remote.effects) == 4


async def test_concurrent_sweeps_remove_every_old_record_once(database: Any) -> None:
    remote = Remote()
    for index in range(9):
        old = NOW - RETENTION - DAY * (index + 1)
        await _effect_at(database, remote, f"filing:{index}", EffectKind.FILE_ISSUE, index, old)
    await _effect_at(database, remote, "filing:new", EffectKind.FILE_ISSUE, 99, NOW)

    def sweep() -> int:
        return expire_all(database, before=NOW - RETENTION, batch=2)

    removed = await asyncio.gather(*(asyncio.to_thread(sweep) for _ in range(3)))
    assert sum(removed) == 9
    assert database.call(_keys) == ["filing:new"]


async def test_a_key_a_retry_refreshes_while_a_sweep_waits_on_its_row_is_kept(
    pg_url: str,
) -> None:
    """The retry holds the old row's lock (its claim) and makes it recent; the sweep, which
    chose the row as old, waits on that lock and then reads the row again: kept."""
    database = dbmod.Database.from_url(pg_url)
    dbmod.upgrade(database.engine)
    try:
        remote = Remote()
        old = NOW - RETENTION * 2
        await _effect_at(database, remote, "filing:retried", EffectKind.FILE_ISSUE, 1, old)
        with database.engine.connect() as retry:
            retry.execute(
                update(SideEffect).where(SideEffect.key == "filing:retried").values(updated_at=NOW)
            )  # not committed: the row is locked
            sweep = asyncio.create_task(
                asyncio.to_thread(expire_all, database, before=NOW - RETENTION)
            )
            await wait_for(lambda: _waiting_on_a_lock(database), within=PATIENCE_SECONDS)
            retry.commit()
        assert await sweep == 0
        assert database.call(_keys) == ["filing:retried"]
    finally:
        database.dispose()


def _waiting_on_a_lock(database: Any) -> bool:
    """Some statement of this database's server waits on a row lock (the sweep's delete)."""
    with database.engine.connect() as connection:
        waiting = connection.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query ILIKE 'DELETE FROM side_effects%'"
            )
        )
    return bool(waiting)
