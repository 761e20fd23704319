"""Side effects that happen once per key, across retries, double clicks, instances and crashes.

`run_once` claims the key in the database with a lease before acting, so a concurrent
caller waits for the first one's result instead of acting too. Before acting it asks the
caller's `reconcile` whether the effect already happened (a crash or an ambiguous upstream
error after the effect), and stores the result when done; later calls return it unchanged.

One request per key (IETF draft "The Idempotency-Key HTTP Header Field", section 2.7): a
request under a key used before is checked against the one stored (the caller's
`check_stored`, which raises `KeyReused`, 422, through `check_same_request`, as a chat
turn's key is checked) before anything is claimed or done. An attempt that failed with no
effect holds no result: a retry runs again, and it performs what it asks itself.

Requests and results are the caller's typed records (msgspec Structs: bot/filing.py,
bot/decisions.py), stored as the JSON `msgspec.to_builtins` makes of them in the
`request` and `result` columns and decoded with the caller's types when read back. That
JSON is the only untyped data here and it stays in this module: one table holds every
kind's rows, each kind with its own shape, so only the caller knows the type.

Rows are kept for a bounded window (`expire`, from the reconciler's periodic pass): a key
exists to make retries safe, and retries come within minutes to hours (a client's
Idempotency-Key retry, a double click, a crash's restart), never a month later. A row of
`run_once`'s kinds (`EffectKind`) untouched for STEELFRAME_SIDE_EFFECT_RETENTION_DAYS goes;
a request under its key after that is a new request. Chat turns' keys (kind `chat_turn`,
bot/chat/turn_keys.py) are not swept here: they live as long as their chat session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Generic, TypeVar

import msgspec
from sqlalchemy import JSON, String, UniqueConstraint, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.clock import Clock, utcnow
from bot.contracts.errors import ErrorDetail
from bot.db import Base, Database
from bot.errors import Conflict, SteelframeError

DEFAULT_LEASE = timedelta(seconds=60)
SWEEP_BATCH = 500  # rows deleted per transaction: short locks, a bounded statement
SWEEP_MAX_BATCHES = 20  # per pass: a backlog goes over a few passes, none runs long
DEFAULT_WAIT_SECONDS = 30.0
POLL_SECONDS = 0.05
PENDING = "pending"
DONE = "done"

Req = TypeVar("Req")
Res = TypeVar("Res")
# A request or result as stored: the builtins (dicts, lists, strings, numbers) of a record.
_Json = Any


class EffectKind(StrEnum):
    """The kinds `run_once` stores, which `expire` sweeps by age."""

    FILE_ISSUE = "file_issue"  # bot/filing.py
    PUBLISH_DECISION = "publish_decision"  # bot/decisions.py


class SideEffect(Base):
    __tablename__ = "side_effects"
    __table_args__ = (UniqueConstraint("key", name="uq_side_effects_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(120))
    kind: Mapped[str] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(20))
    request: Mapped[_Json] = mapped_column(JSON)
    result: Mapped[_Json | None] = mapped_column(JSON)
    lease_until: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class KeyReused(SteelframeError):
    """The key names another request (another chat message, another Decision): the client
    reused a key for a new request. Nothing is run or changed (IETF draft
    "The Idempotency-Key HTTP Header Field", section 2.7: 422)."""

    status = 422
    code = "idempotency_key_reused"


def check_same_request(
    first: object, again: object, *, what: str, detail: ErrorDetail | None = None
) -> None:
    """Refuse (KeyReused) a request under a used key that asks something else than the
    key's first request asked: `first` and `again` are what each asked, `what` names it
    ("message", "Decision")."""
    if first != again:
        raise KeyReused(
            f"this Idempotency-Key was used for another {what}; send a new {what} with a new key",
            detail=detail if detail is not None else ErrorDetail(field="Idempotency-Key"),
        )


@dataclass(frozen=True)
class Outcome(Generic[Res]):
    result: Res
    reused: bool


@dataclass(frozen=True)
class _Claim:
    owner: bool
    status: str
    request: _Json
    result: _Json | None
    fresh: bool = False  # first claim of the key: nothing can have happened yet


Action = Callable[[Req], Awaitable[Res]]
Reconcile = Callable[[Req], Awaitable[Res | None]]
# Given the request stored under the key, raises (check_same_request) unless the request at
# hand asks the same.
CheckStored = Callable[[Req], None]


async def run_once(
    db: Database,
    *,
    key: str,
    kind: EffectKind,
    request: Req,
    perform: Action[Req, Res],
    reconcile: Reconcile[Req, Res],
    result_type: type[Res],
    check_stored: CheckStored[Req] | None,
    clock: Clock = utcnow,
    lease: timedelta = DEFAULT_LEASE,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
) -> Outcome[Res]:
    """Perform `kind` for `key` at most once, for one request per key.

    A key used before: `check_stored` gets its stored request (decoded as `type(request)`)
    and raises KeyReused when `request` asks something else; nothing is claimed or done.
    None: the key alone names what is done (a key the service derives from it, as a
    filing's). The stored result of a finished call is the answer (decoded as
    `result_type`). An unfinished one (a crash, an error) may have had its effect:
    `reconcile` looks for it with the request stored then; if it finds none, `perform`
    runs with `request`, which the row stores from then on. A stored row that does not
    decode as those types raises (msgspec.ValidationError): a kind's shape is its own."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    stored_form = msgspec.to_builtins(request)  # what a claim stores

    def check(stored: _Json) -> None:
        earlier = msgspec.convert(stored, type(request))
        if check_stored is not None:
            check_stored(earlier)

    while True:
        claim = await db.run(_claim, key, kind, stored_form, lease, clock, check)
        if claim.status == DONE and claim.result is not None:
            return Outcome(msgspec.convert(claim.result, result_type), reused=True)
        if claim.owner:
            break
        if loop.time() > deadline:
            raise Conflict(f"{kind} {key} is in progress elsewhere; retry shortly")
        await asyncio.sleep(POLL_SECONDS)
    try:
        result, reused = await _effect(claim, request, perform, reconcile)
    except BaseException:
        await db.run(_release, key, clock)
        raise
    await db.run(_complete, key, msgspec.to_builtins(result), clock)
    return Outcome(result, reused=reused)


async def _effect(
    claim: _Claim, request: Req, perform: Action[Req, Res], reconcile: Reconcile[Req, Res]
) -> tuple[Res, bool]:
    """The claimed key's effect, and whether an earlier attempt had it already."""
    # A key claimed before (a crash, an error) may have had its effect: look first, for what
    # that attempt asked. A fresh key cannot have, so the common path costs no look-up.
    earlier = None if claim.fresh else msgspec.convert(claim.request, type(request))
    found = None if earlier is None else await reconcile(earlier)
    if found is not None:
        return found, True
    try:
        return await perform(request), False
    except Exception:
        # The effect may have happened despite the error (a 5xx after the write).
        found = await reconcile(request)
        if found is None:
            raise
        return found, False


def completed(session: Session, key: str, result_type: type[Res]) -> Res | None:
    """The stored result of a finished side effect, if `key` has one."""
    row = session.scalar(select(SideEffect).where(SideEffect.key == key))
    if row is None or row.status != DONE or row.result is None:
        return None
    return msgspec.convert(row.result, result_type)


def _any_request(stored: _Json) -> None:
    """A claim's check that takes whatever the key stored."""


def _claim(
    session: Session,
    key: str,
    kind: str,
    request: _Json,
    lease: timedelta,
    clock: Clock,
    check: Callable[[_Json], None] = _any_request,
) -> _Claim:
    """Claim `key` for `request`. A row there already is first `check`ed (raising rolls the
    claim back: nothing changes); taking over an unfinished one stores `request` as what is
    attempted now, and the claim carries the request stored before, for the look-up."""
    now = clock()
    row = session.scalar(select(SideEffect).where(SideEffect.key == key).with_for_update())
    if row is None:
        row = SideEffect(
            key=key,
            kind=kind,
            status=PENDING,
            request=request,
            result=None,
            lease_until=now + lease,
            created_at=now,
            updated_at=now,
        )
        try:
            with session.begin_nested():
                session.add(row)
        except IntegrityError:
            return _Claim(owner=False, status=PENDING, request=request, result=None)
        return _Claim(owner=True, status=PENDING, request=row.request, result=None, fresh=True)
    check(row.request)  # before its state: another request is refused whatever it is
    if row.status == DONE:
        return _Claim(owner=False, status=DONE, request=row.request, result=row.result)
    if row.lease_until is not None and row.lease_until > now:
        return _Claim(owner=False, status=PENDING, request=row.request, result=None)
    earlier = row.request
    row.request = request
    row.lease_until = now + lease
    row.updated_at = now
    return _Claim(owner=True, status=PENDING, request=earlier, result=None)


def _complete(session: Session, key: str, result: _Json, clock: Clock) -> None:
    row = session.scalar(select(SideEffect).where(SideEffect.key == key).with_for_update())
    assert row is not None
    row.status = DONE
    row.result = result
    row.lease_until = None
    row.updated_at = clock()


def _release(session: Session, key: str, clock: Clock) -> None:
    row = session.scalar(select(SideEffect).where(SideEffect.key == key).with_for_update())
    if row is not None and row.status == PENDING:
        row.lease_until = None
        row.updated_at = clock()


def expire(session: Session, *, before: datetime, batch: int = SWEEP_BATCH) -> int:
    """Delete up to `batch` rows of `EffectKind` last touched before `before`; how many.

    Safe to run twice and side by side: a row another sweep deleted is simply not there,
    and the age is checked again on the row the delete locks, so a key a retry claims or
    completes meanwhile (which sets `updated_at` to now) is left for that retry (PostgreSQL
    re-reads the condition on a row updated under it; SQLite runs one writer at a time)."""
    old = (SideEffect.kind.in_(list(EffectKind)), SideEffect.updated_at < before)
    oldest = select(SideEffect.id).where(*old).order_by(SideEffect.id).limit(batch)
    removed = session.execute(
        delete(SideEffect)
        .where(SideEffect.id.in_(oldest.scalar_subquery()), *old)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(removed, "rowcount", 0) or 0)


def expire_all(
    db: Database,
    *,
    before: datetime,
    batch: int = SWEEP_BATCH,
    max_batches: int = SWEEP_MAX_BATCHES,
) -> int:
    """`expire` batch by batch, each its own transaction, until no old row is left or
    `max_batches` ran (the rest goes next pass); how many rows went."""
    total = 0
    for _ in range(max_batches):
        removed = db.call(expire, before=before, batch=batch)
        total += removed
        if removed < batch:
            break
    return total
