"""Changes that decide on what they read, with another change of the same row committing
meanwhile, on both backends (tests/fakes/interleave.py): each holds what it read until it
commits, so the other one commits before its read or after its write, never in between.

Before, each of these lost the other's change: an archive hid a task that a pickup had just
brought back (the board no longer showed it, and its merges, reviews and CI were ignored);
a run settling a review thread left it settled over a writer's reply that had reopened it
(the reply never answered); and a run taking up threads took up one dismissed or replied to
after it listed them (a deleted comment answered; a reply left out of what it answered)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.db import Database
from bot.errors import Conflict
from bot.github.records import GitHubUser, ReviewComment
from bot.lifecycle import board, review_pickup, reviews, tasks, thread_answers
from bot.lifecycle.models import EventKind, ReviewThread, ThreadKind, ThreadState
from bot.lifecycle.states import TaskState
from bot.lifecycle.thread_answers import ThreadAnswer
from bot.lifecycle.transition import Move, apply
from tests.fakes.interleave import PATIENCE, overtakes

PULL = reviews.PullOf(
    repo="octo/app", number=5, head_ref="steelframe/issue-1", head_repo="octo/app", author="bot"
)
ROOT = 100  # the review comment that opened the thread


def _task(db: Database, *, state: TaskState) -> int:
    def make(session: Session) -> int:
        task = tasks.new_task(
            session, repo="octo/app", issue=1, title="t", origin_session=None, actor="test"
        )
        session.flush()
        for step in (TaskState.RUNNING, state):
            apply(session, task.id, Move(step, actor="test"))
        return task.id

    return db.call(make)


def _thread(db: Database, task_id: int, *, picked_job: str | None) -> int:
    def add(session: Session) -> int:
        now = datetime.now(UTC)
        thread = ReviewThread(
            task_id=task_id,
            kind=ThreadKind.COMMENT,
            root_id=ROOT,
            pr_number=PULL.number,
            author="writer",
            state=ThreadState.OPEN,
            text="Rename this.",
            picked_job=picked_job,
            created_at=now,
            updated_at=now,
        )
        session.add(thread)
        session.flush()
        return thread.id

    return db.call(add)


def _row(db: Database, thread_id: int) -> ReviewThread:
    row = db.call(lambda s: s.get(ReviewThread, thread_id))
    assert row is not None
    return row


def _writer_replies(db: Database, task_id: int, comment_id: int) -> None:
    """What the webhook for a writer's reply on the thread commits."""
    reply = ReviewComment(
        id=comment_id,
        body="Not this way, please.",
        path="app.py",
        user=GitHubUser(login="writer", id=7, type="User"),
        commit_id="0" * 40,
        in_reply_to_id=ROOT,
    )
    now = datetime.now(UTC)
    db.call(reviews._record_comment, task_id, PULL, reply, 9000 + comment_id, lambda: now)


def _pausing(
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    name: str,
    have_read: threading.Event,
    go_on: threading.Event,
    *,
    call: int = 1,
) -> None:
    """`module.name` made to stop after its `call`-th return (the read) in this thread,
    until `go_on`; in other threads (the other change) it runs as ever."""
    real, reader = getattr(module, name), threading.current_thread()
    calls = 0

    def paused(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        found = real(*args, **kwargs)
        if threading.current_thread() is reader:
            calls += 1
            if calls == call:
                have_read.set()
                assert go_on.wait(PATIENCE)
        return found

    monkeypatch.setattr(module, name, paused)


@pytest.mark.parametrize("read", [1, 2], ids=["after its first read", "after its locked read"])
def test_an_archive_never_hides_a_task_a_pickup_brought_back_meanwhile(
    two_processes: tuple[Database, Database], monkeypatch: pytest.MonkeyPatch, read: int
) -> None:
    """The archive reads the task (failed) and, finding it finished, reads it again with
    its row held. A pickup that commits after the first read is seen by the second (a
    409); one that tries after the second waits for the archive, then shows the task."""
    first, second = two_processes
    task_id = _task(first, state=TaskState.FAILED)
    answers: list[str] = []

    def archive(session: Session, have_read: threading.Event, go_on: threading.Event) -> None:
        _pausing(monkeypatch, tasks, "get_task", have_read, go_on, call=read)
        try:
            board.archive_tx(session, task_id, "ada")
            answers.append("archived")
        except Conflict:
            answers.append("409")

    def picked_up_again() -> None:  # what pickup._reopen commits
        again = Move(
            TaskState.QUEUED,
            actor="relabel",
            changes={"generation": 2, "attempts": 0, "archived": False},
        )
        second.call(apply, task_id, again)

    overtook = overtakes(first, archive, picked_up_again)
    monkeypatch.undo()
    task = first.call(tasks.get_task, task_id)
    assert task.state == TaskState.QUEUED and not task.archived  # on the board, live
    kinds = [event.kind for event in first.call(tasks.events, task_id)]
    if read == 1:
        assert overtook and answers == ["409"] and EventKind.ARCHIVED not in kinds
    else:
        assert not overtook and answers == ["archived"]
        assert kinds[-2:] == [EventKind.ARCHIVED, EventKind.TRANSITION]  # then picked up


def test_a_writers_reply_while_a_run_settles_its_thread_opens_it_again(
    two_processes: tuple[Database, Database], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two_processes
    task_id = _task(first, state=TaskState.DELIVERED)
    thread_id = _thread(first, task_id, picked_job="job-1")
    answer = ThreadAnswer(
        kind=ThreadKind.COMMENT, root_id=ROOT, state=ThreadState.ADDRESSED, text="Renamed."
    )

    def settle(session: Session, have_read: threading.Event, go_on: threading.Event) -> None:
        _pausing(monkeypatch, thread_answers, "_open_thread", have_read, go_on)
        thread_answers._settle(session, task_id, answer, "job-1", lambda: datetime.now(UTC))

    overtook = overtakes(first, settle, lambda: _writer_replies(second, task_id, 101))
    row = _row(first, thread_id)
    assert not overtook
    assert row.state == ThreadState.OPEN and row.picked_job is None  # for the next run


@pytest.mark.parametrize("change", ["deleted", "replied to"])
def test_a_run_takes_up_no_thread_that_changed_after_it_was_listed(
    two_processes: tuple[Database, Database], change: str
) -> None:
    first, second = two_processes
    task_id = _task(first, state=TaskState.DELIVERED)
    thread_id = _thread(first, task_id, picked_job=None)
    listed = first.call(review_pickup._threads_to_take, task_id, False)
    seen = {t.id: t.updated_at for t in listed}
    if change == "deleted":  # the comment deleted on GitHub: declined
        deleted = ReviewComment(
            id=ROOT, body="", path="app.py", user=None, commit_id="0" * 40, in_reply_to_id=None
        )
        second.call(reviews._comment_changed, task_id, deleted, True, lambda: datetime.now(UTC))
    else:
        _writer_replies(second, task_id, 101)

    taken = first.call(review_pickup._take, task_id, seen, {}, "job-1", lambda: datetime.now(UTC))

    assert taken == []
    row = _row(first, thread_id)
    assert row.picked_job is None  # left for the next run, as it is now
    expected = ThreadState.DECLINED if change == "deleted" else ThreadState.OPEN
    assert row.state == expected
    if change == "replied to":
        waiting = first.call(
            lambda s: list(
                s.scalars(select(ReviewThread.id).where(ReviewThread.picked_job.is_(None)))
            )
        )
        assert waiting == [thread_id]
