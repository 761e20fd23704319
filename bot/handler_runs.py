"""Exactly once for webhook handlers: a handler's database effect and the record that the
handler is done for its delivery commit in one transaction.

The webhook processor runs each handler inside `running(delivery, handler)`. Code that
makes the handler's effect (in `webhooks` or in the core, e.g. the task lifecycle's pickup)
calls `record_done(session)` inside the transaction that writes it. Then a crash can leave
either both (the record says the handler is done, so a restarted process skips it) or
neither (nothing happened, so running it again is its first run): never the effect without
the record, which would run the handler a second time. Outside a handler run `record_done`
does nothing, so the same core code serves the operator API and the worker unchanged.

The run is carried by a context variable: `Database.run` (asyncio.to_thread) copies it into
the thread that runs the transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import String, delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.clock import Clock
from bot.db import Base


class HandlerDone(Base):
    """A handler whose effect is committed for a delivery (written with that effect)."""

    __tablename__ = "github_delivery_handlers"

    delivery_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    handler: Mapped[str] = mapped_column(String(200), primary_key=True)
    done_at: Mapped[datetime]


@dataclass(frozen=True)
class HandlerRun:
    delivery_id: str
    handler: str
    clock: Clock


_current: ContextVar[HandlerRun | None] = ContextVar("webhook_handler_run", default=None)


@contextmanager
def running(delivery_id: str, handler: str, clock: Clock) -> Iterator[None]:
    """While the block runs, `record_done` records `handler` as done for `delivery_id`."""
    token = _current.set(HandlerRun(delivery_id, handler, clock))
    try:
        yield
    finally:
        _current.reset(token)


def record_done(session: Session) -> None:
    """Record the running webhook handler (if any) as done, in `session`'s transaction:
    call it in the transaction that makes the handler's effect. Idempotent within a run (a
    handler whose effect takes two transactions records with the first: keep it to one)."""
    run = _current.get()
    if run is None:
        return
    # One statement (no lookup first): this runs once per handler per delivery under load.
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    session.execute(
        insert(HandlerDone)
        .values(delivery_id=run.delivery_id, handler=run.handler, done_at=run.clock())
        .on_conflict_do_nothing()
    )


def done_handlers(session: Session, delivery_ids: Sequence[str]) -> dict[str, set[str]]:
    """delivery id -> the handlers recorded as done for it."""
    done: dict[str, set[str]] = {}
    if not delivery_ids:
        return done
    rows = session.execute(
        select(HandlerDone.delivery_id, HandlerDone.handler).where(
            HandlerDone.delivery_id.in_(list(delivery_ids))
        )
    )
    for delivery_id, handler in rows:
        done.setdefault(delivery_id, set()).add(handler)
    return done


def forget_done(session: Session, delivery_id: str) -> None:
    """Every handler runs again for this delivery (an operator's replay of a processed one)."""
    session.execute(delete(HandlerDone).where(HandlerDone.delivery_id == delivery_id))
