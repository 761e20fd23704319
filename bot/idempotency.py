"""Side effects that happen once per key, across retries, double clicks, instances and crashes.

`run_once` claims the key in the database with a lease before acting, so a concurrent
caller waits for the first one's result instead of acting too. Before acting it asks the
caller's `reconcile` whether the effect already happened (a crash or an ambiguous upstream
error after the effect), and stores the result when done; later calls return it unchanged.

Requests and results are the caller's typed records (msgspec Structs: bot/filing.py,
bot/decisions.py), stored as the JSON `msgspec.to_builtins` makes of them in the
`request` and `result` columns and decoded with the caller's types when read back. That
JSON is the only untyped data here and it stays in this module: one table holds every
kind's rows, each kind with its own shape, so only the caller knows the type.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

import msgspec
from sqlalchemy import JSON, String, UniqueConstraint, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.clock import Clock, utcnow
from bot.db import Base, Database
from bot.errors import Conflict

DEFAULT_LEASE = timedelta(seconds=60)
DEFAULT_WAIT_SECONDS = 30.0
POLL_SECONDS = 0.05
PENDING = "pending"
DONE = "done"

Req = TypeVar("Req")
Res = TypeVar("Res")
# A request or result as stored: the builtins (dicts, lists, strings, numbers) of a record.
_Json = Any


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


async def run_once(
    db: Database,
    *,
    key: str,
    kind: str,
    request: Req,
    perform: Action[Req, Res],
    reconcile: Reconcile[Req, Res],
    result_type: type[Res],
    clock: Clock = utcnow,
    lease: timedelta = DEFAULT_LEASE,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
) -> Outcome[Res]:
    """Perform `kind` for `key` at most once; the first stored request wins for the key.

    `perform` and `reconcile` get the stored request decoded as `type(request)`; a result
    stored by an earlier call is decoded as `result_type`. A stored row that does not
    decode as those types raises (msgspec.ValidationError): a kind's shape is its own."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    stored_form = msgspec.to_builtins(request)  # what a first claim stores
    while True:
        claim = await db.run(_claim, key, kind, stored_form, lease, clock)
        if claim.status == DONE and claim.result is not None:
            return Outcome(msgspec.convert(claim.result, result_type), reused=True)
        if claim.owner:
            break
        if loop.time() > deadline:
            raise Conflict(f"{kind} {key} is in progress elsewhere; retry shortly")
        await asyncio.sleep(POLL_SECONDS)
    try:
        # Inside the try: a stored request that does not decode releases the lease too.
        stored_request = msgspec.convert(claim.request, type(request))
        # A key claimed before (a crash, an error) may have had its effect: look first. A
        # fresh key cannot have, so the common path costs no look-up.
        result = None if claim.fresh else await reconcile(stored_request)
        reused = result is not None
        if result is None:
            try:
                result = await perform(stored_request)
            except Exception:
                # The effect may have happened despite the error (a 5xx after the write).
                result = await reconcile(stored_request)
                if result is None:
                    raise
    except BaseException:
        await db.run(_release, key, clock)
        raise
    await db.run(_complete, key, msgspec.to_builtins(result), clock)
    return Outcome(result, reused=reused)


def completed(session: Session, key: str, result_type: type[Res]) -> Res | None:
    """The stored result of a finished side effect, if `key` has one."""
    row = session.scalar(select(SideEffect).where(SideEffect.key == key))
    if row is None or row.status != DONE or row.result is None:
        return None
    return msgspec.convert(row.result, result_type)


def _claim(
    session: Session,
    key: str,
    kind: str,
    request: _Json,
    lease: timedelta,
    clock: Clock,
) -> _Claim:
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
    if row.status == DONE:
        return _Claim(owner=False, status=DONE, request=row.request, result=row.result)
    if row.lease_until is not None and row.lease_until > now:
        return _Claim(owner=False, status=PENDING, request=row.request, result=None)
    row.lease_until = now + lease
    row.updated_at = now
    return _Claim(owner=True, status=PENDING, request=row.request, result=None)


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
