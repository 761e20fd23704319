"""Run leases: one active run per task, renewed by a heartbeat, taken over once expired.

A row per task in `task_leases`. Acquire inserts it, or takes it over when it has expired
(its holder stopped beating: crashed, killed, partitioned). Every renewal and release is
conditional on the holder, so a run that lost its lease can never extend or drop another's.

The heartbeat (`Heartbeat`) is a thread of its own per run, from acquire to release: never
a task on the run's event loop nor a call queued on its default executor, which the run's
own work (a synchronous call on the loop, every executor thread busy) could hold up past
the lease. A CI run at load 20 lost its lease that way and left its task `running`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.lifecycle.models import TaskLease
from bot.lifecycle.tasks import hold

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: unique per run, with the host and pid for orphan clean-up."""

    id: str
    host: str
    pid: int

    @property
    def run(self) -> str:
        """A short name for this run (folder names)."""
        return self.id.rsplit(":", 1)[-1]

    @classmethod
    def this_process(cls) -> Holder:
        host = socket.gethostname()
        pid = os.getpid()
        return cls(id=f"{host}:{pid}:{uuid.uuid4().hex[:8]}", host=host, pid=pid)


def _insert(session: Session, task_id: int, holder: Holder, ttl: float, clock: Clock) -> None:
    now = clock()
    session.add(
        TaskLease(
            task_id=task_id,
            holder=holder.id,
            host=holder.host,
            pid=holder.pid,
            acquired_at=now,
            heartbeat_at=now,
            expires_at=now + timedelta(seconds=ttl),
        )
    )
    session.flush()


def _take_over(session: Session, task_id: int, holder: Holder, ttl: float, clock: Clock) -> bool:
    now = clock()
    result = session.execute(
        update(TaskLease)
        .where(
            TaskLease.task_id == task_id,
            (TaskLease.expires_at < now) | (TaskLease.holder == holder.id),
        )
        .values(
            holder=holder.id,
            host=holder.host,
            pid=holder.pid,
            child_pgid=None,
            worktree=None,
            acquired_at=now,
            heartbeat_at=now,
            expires_at=now + timedelta(seconds=ttl),
        )
        .execution_options(synchronize_session=False)
    )
    return getattr(result, "rowcount", 0) == 1


def acquire(
    db: Database, task_id: int, holder: Holder, *, ttl: float, clock: Clock = utcnow
) -> bool:
    """True when `holder` now holds the task's lease; False while another live run holds it."""
    try:
        db.call(_insert, task_id, holder, ttl, clock)
        return True
    except IntegrityError:
        pass
    return db.call(_take_over, task_id, holder, ttl, clock)


def _renew(session: Session, task_id: int, holder_id: str, ttl: float, clock: Clock) -> bool:
    now = clock()
    result = session.execute(
        update(TaskLease)
        .where(TaskLease.task_id == task_id, TaskLease.holder == holder_id)
        .values(heartbeat_at=now, expires_at=now + timedelta(seconds=ttl))
        .execution_options(synchronize_session=False)
    )
    return getattr(result, "rowcount", 0) == 1


def renew(db: Database, task_id: int, holder: Holder, *, ttl: float, clock: Clock = utcnow) -> bool:
    """The heartbeat: False means the lease was lost and the run must stop."""
    return db.call(_renew, task_id, holder.id, ttl, clock)


def _note(session: Session, task_id: int, holder_id: str, values: dict[str, object]) -> None:
    session.execute(
        update(TaskLease)
        .where(TaskLease.task_id == task_id, TaskLease.holder == holder_id)
        .values(**values)
        .execution_options(synchronize_session=False)
    )


def note_child(db: Database, task_id: int, holder: Holder, *, pgid: int | None) -> None:
    db.call(_note, task_id, holder.id, {"child_pgid": pgid})


def note_worktree(db: Database, task_id: int, holder: Holder, *, path: str | None) -> None:
    db.call(_note, task_id, holder.id, {"worktree": path})


def _release(session: Session, task_id: int, holder_id: str) -> None:
    session.execute(
        delete(TaskLease)
        .where(TaskLease.task_id == task_id, TaskLease.holder == holder_id)
        .execution_options(synchronize_session=False)
    )


def release(db: Database, task_id: int, holder: Holder) -> None:
    db.call(_release, task_id, holder.id)


def current(session: Session, task_id: int) -> TaskLease | None:
    return session.get(TaskLease, task_id, populate_existing=True)


def is_live(lease: TaskLease | None, now: datetime) -> bool:
    return lease is not None and lease.expires_at >= now


def expired(session: Session, now: datetime) -> list[TaskLease]:
    return list(session.scalars(select(TaskLease).where(TaskLease.expires_at < now)))


def drop_expired(session: Session, task_id: int, holder_id: str, now: datetime) -> bool:
    """Remove a lease that is still the expired one we looked at (the reconciler's claim)."""
    result = session.execute(
        delete(TaskLease)
        .where(
            TaskLease.task_id == task_id,
            TaskLease.holder == holder_id,
            TaskLease.expires_at < now,
        )
        .execution_options(synchronize_session=False)
    )
    return getattr(result, "rowcount", 0) == 1


def check(db: Database, task_id: int, holder: Holder, *, clock: Clock = utcnow) -> None:
    """Raise `tasks.LeaseLost` unless `holder` still holds the live lease: a run calls it
    right before each effect outside the database (push, pull request)."""
    db.call(hold, task_id, holder.id, clock)


async def confirm(db: Database, task_id: int, holder: Holder, *, clock: Clock = utcnow) -> None:
    """`check` for a run's coroutines: the read runs on a worker thread (`Database.run`),
    never on the run's event loop, which a slow database would stall (it carries the run's
    termination watch and its GitHub calls)."""
    await db.run(hold, task_id, holder.id, clock)


class Heartbeat:
    """Renews `holder`'s lease every `every` seconds (by the monotonic clock, so a late wake
    renews at once) on a thread of its own until `stop`; calls `on_lost` once, from that
    thread, when a renewal finds the lease no longer this holder's. A renewal that fails
    (the database unreachable) is tried again at the next beat: only the lease's own row
    says it was lost."""

    def __init__(
        self,
        db: Database,
        task_id: int,
        holder: Holder,
        *,
        ttl: float,
        every: float,
        on_lost: Callable[[], None],
        clock: Clock = utcnow,
    ) -> None:
        self._db, self._task_id, self._holder = db, task_id, holder
        self._ttl, self._every, self._clock = ttl, every, clock
        self._on_lost = on_lost
        self._stopped = threading.Event()
        self.lost = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name=f"lease-heartbeat-{task_id}", daemon=True
        )

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        """No beat starts after this; one under way is waited for, at most a lease period
        (the database hanging): whenever it lands, a renewal after the release finds no row
        of this holder's and changes nothing, and one after `stop` reports no loss."""
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._ttl)

    def _beat(self) -> None:
        renewed_at = due = time.monotonic()  # acquired just before the thread started
        while not self._stopped.wait(max(0.0, due + self._every - time.monotonic())):
            due = time.monotonic()
            try:
                renewed = renew(
                    self._db, self._task_id, self._holder, ttl=self._ttl, clock=self._clock
                )
            except Exception as exc:  # the database is away: the next beat tries again
                log.warning("lease: task %s not renewed now: %s", self._task_id, exc)
                continue
            if not renewed:
                if not self._stopped.is_set():  # not a renewal racing the run's release
                    self.lost.set()
                    self._on_lost()
                return
            if (late := due - renewed_at - self._ttl) > 0:
                # Still ours (nobody took it), but a fenced write meanwhile was refused.
                log.warning("lease: task %s renewed %.1f s after it expired", self._task_id, late)
            renewed_at = due
