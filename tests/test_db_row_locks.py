"""What a transaction reads `FOR UPDATE` stays true until it commits, on both backends:
PostgreSQL locks the row; SQLite, which has no row locks, takes the database's write lock
(bot/db.py). Without that, on SQLite the read ran outside the transaction its write opened,
and another process could commit in between: a stalled run's fenced change landed after
another run had taken its lease over (seen in CI, tests/test_lifecycle_fencing.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from bot.clock import utcnow
from bot.db import Database, upgrade
from bot.lifecycle import leases, tasks
from bot.lifecycle.leases import Holder
from bot.lifecycle.models import Task

# How long the second transaction gets to overtake the first one's read. A correct lock
# makes it wait the whole time; without one it overtakes at once.
CHANCE_TO_OVERTAKE = 2.0
PATIENCE = 30.0


@pytest.fixture
def two_processes(any_db_url: str) -> Iterator[tuple[Database, Database]]:
    """Two engines on one database: connections of their own, as two processes have."""
    first, second = Database.from_url(any_db_url), Database.from_url(any_db_url)
    upgrade(first.engine)
    yield first, second
    first.dispose()
    second.dispose()


def _new_task(db: Database) -> int:
    with db.session() as session:
        task = tasks.new_task(
            session, repo="octo/app", issue=1, title="t", origin_session=None, actor="test"
        )
        session.flush()
        return task.id


def _overtakes(
    first: Database,
    read_then_write: Callable[[Session, threading.Event, threading.Event], None],
    other: Callable[[], None],
) -> bool:
    """Run `read_then_write` in `first` until it has read (it sets its first event), then
    `other` in a thread of its own, then let the first write and commit (its second event).
    True when `other` finished between the first one's read and its write."""
    have_read, go_on, other_done = threading.Event(), threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def guarded(work: Callable[[], object], done: threading.Event) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # shown by the assertion below
                failures.append(exc)
            finally:
                done.set()

        return run

    reader = threading.Thread(
        target=guarded(lambda: first.call(read_then_write, have_read, go_on), have_read)
    )
    reader.start()
    assert have_read.wait(PATIENCE)
    overtaker = threading.Thread(target=guarded(other, other_done))
    overtaker.start()
    overtook = other_done.wait(CHANCE_TO_OVERTAKE)
    go_on.set()
    reader.join(PATIENCE)
    overtaker.join(PATIENCE)
    assert not failures, failures
    assert not reader.is_alive() and not overtaker.is_alive()
    return overtook


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

    assert not _overtakes(first, fenced_change, take_over), "it took over in between"
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

    assert not _overtakes(first, slow_increment, lambda: second.call(increment))
    task = first.call(tasks.get_task, task_id)
    assert task.attempts == 2
