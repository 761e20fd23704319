"""What a transaction reads `FOR UPDATE` stays true until it commits, on both backends:
PostgreSQL locks the row; SQLite, which has no row locks, takes the database's write lock
(bot/db.py). Without that, on SQLite the read ran outside the transaction its write opened,
and another process could commit in between: a stalled run's fenced change landed after
another run had taken its lease over (seen in CI, tests/test_lifecycle_fencing.py)."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy.orm import Session

from bot.clock import utcnow
from bot.db import Database
from bot.lifecycle import leases, tasks
from bot.lifecycle.leases import Holder
from bot.lifecycle.models import Task
from tests.fakes.interleave import PATIENCE, overtakes


def _new_task(db: Database) -> int:
    with db.session() as session:
        task = tasks.new_task(
            session, repo="octo/app", issue=1, title="t", origin_session=None, actor="test"
        )
        session.flush()
        return task.id


def test_a_run_that_checked_its_lease_commits_its_change_before_a_takeover(
    two_processes: tuple[Database, Database],
) -> None:
    """The stalled run: it checks its lease (live), stalls, and wakes to write. A takeover
    that tries meanwhile waits for that write; it never commits between check and change."""
    first, second = two_processes
    task_id = _new_task(first)
    stalled, other = Holder.this_process(), Holder.this_process()
    assert leases.acquire(first, task_id, stalled, ttl=600)

    def fenced_change(session: Session, have_read: threading.Event, go_on: threading.Event) -> None:
        tasks.hold(session, task_id, stalled.id)  # the lease check: this run holds it
        have_read.set()
        assert go_on.wait(PATIENCE)
        tasks.touch(session, task_id, summary="the stalled run's change")

    def take_over() -> None:
        later = utcnow() + timedelta(seconds=601)  # the stalled run's lease has expired
        assert leases.acquire(second, task_id, other, ttl=600, clock=lambda: later)

    assert not overtakes(first, fenced_change, take_over), "it took over in between"
    lease = first.call(leases.current, task_id)
    assert lease is not None and lease.holder == other.id  # it took over, after the change


def test_two_read_modify_writes_of_a_row_lose_no_update(
    two_processes: tuple[Database, Database],
) -> None:
    """Two transactions each read a counter `FOR UPDATE` and write it plus one: the second
    waits for the first, so both increments count."""
    first, second = two_processes
    task_id = _new_task(first)

    def increment(session: Session) -> None:
        task = session.get(Task, task_id, with_for_update=True, populate_existing=True)
        assert task is not None
        task.attempts += 1

    def slow_increment(
        session: Session, have_read: threading.Event, go_on: threading.Event
    ) -> None:
        task = session.get(Task, task_id, with_for_update=True, populate_existing=True)
        assert task is not None
        have_read.set()
        assert go_on.wait(PATIENCE)
        task.attempts += 1

    assert not overtakes(first, slow_increment, lambda: second.call(increment))
    task = first.call(tasks.get_task, task_id)
    assert task.attempts == 2
