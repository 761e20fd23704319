"""Side effects that happen once per key, across retries, double clicks, instances and crashes.

`run_once` claims the key in the database with a lease before acting, so a concurrent
caller waits for the first one's result instead of acting too. Before acting it asks the
caller's `reconcile` whether the effect already happened (a crash or an ambiguous upstream
error after the effect), and stores the result when done; later calls return it unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

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


class SideEffect(Base):
    __tablename__ = "side_effects"
    __table_args__ = (UniqueConstraint("key", name="uq_side_effects_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(120))
    kind: Mapped[str] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(20))
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    lease_until: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


@dataclass(frozen=True)
class Outcome:
    result: dict[str, Any]
    reused: bool


@dataclass(frozen=True)
class _Claim:
    owner: bool
    status: str
    request: dict[str, Any]
    result: dict[str, Any] | None
    fresh: bool = False  # first claim of the key: nothing can have happened yet


Action = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Reconcile = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


async def run_once(
    db: Database,
    *,
    key: str,
    kind: str,
    request: dict[str, Any],
    perform: Action,
    reconcile: Reconcile,
    clock: Clock = utcnow,
    lease: timedelta = DEFAULT_LEASE,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
) -> Outcome:
    """Perform `kind` for `key` at most once; the first stored request wins for the key."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    while True:
        claim = await db.run(_claim, key, kind, request, lease, clock)
        if claim.status == DONE and claim.result is not None:
            return Outcome(claim.result, reused=True)
        if claim.owner:
            break
        if loop.time() > deadline:
            raise Conflict(f"{kind} {key} is in progress elsewhere; retry shortly")
        await asyncio.sleep(POLL_SECONDS)
    stored_request = claim.request
    try:
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
    await db.run(_complete, key, result, clock)
    return Outcome(result, reused=reused)


def completed(session: Session, key: str) -> dict[str, Any] | None:
    """The stored result of a finished side effect, if `key` has one."""
    row = session.scalar(select(SideEffect).where(SideEffect.key == key))
    return row.result if row is not None and row.status == DONE else None


def _claim(
    session: Session,
    key: str,
    kind: str,
    request: dict[str, Any],
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


def _complete(session: Session, key: str, result: dict[str, Any], clock: Clock) -> None:
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
