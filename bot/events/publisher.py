"""What the operator events stream carries, and to whom (docs/api.md, "Events").

`task` goes to every operator (the Board is shared), `result` and `session` to the operator
who owns the chat session. Events are notifications: the state itself is in the API (board,
sessions), so a failed append is retried a few times, then logged and dropped; it never
fails the state change it reports. A client that may have missed events gets `resync`: on
a gap in the log, and after a dropped event, once the log takes appends again (`missed`:
the operators who missed one are owed a `resync` event, appended from a timer thread with
backoff until it lands, so their clients reload instead of showing stale state). A debt
whose operators are known is also recorded in the database (`OwedResync`): a process that
dies owing it (a forked work horse exits seconds after its job) leaves it to the next
reconciler pass of any worker, or to any process paying its own (`pay_recorded`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import delete, insert, literal, select
from sqlalchemy.orm import Session

from bot.db import Database
from bot.events.log import Event, EventLog
from bot.lifecycle.models import Task
from bot.lifecycle.states import TaskState
from bot.models import ChatSession, Operator, OwedResync

log = logging.getLogger(__name__)
APPEND_ATTEMPTS = 3
APPEND_BACKOFF_SECONDS = 0.05
# Owed resyncs: the first try this long after the miss, then twice as long each time, at
# most RESYNC_BACKOFF_CAP_SECONDS apart; after RESYNC_ATTEMPTS (about half an hour) an error
# is logged and the debt dropped (those clients show stale state until they reload).
RESYNC_BACKOFF_SECONDS = 1.0
RESYNC_BACKOFF_CAP_SECONDS = 60.0
RESYNC_ATTEMPTS = 40
SETTLE_RETRY_SECONDS = 0.5  # `settle_owed`: between two tries before a process exits
MISSED = {"reason": "events were missed"}
FORGET_BATCH = 1000  # paid debts deleted per statement
RESULT_TEXT_LIMIT = 4000


class EventType(StrEnum):
    TASK = "task"
    RESULT = "result"
    SESSION = "session"
    REVIEW = "review"  # a review run took threads of a task's pull request up
    # A fix run started for failing CI on a task's pull request (bot.lifecycle.ci_intake).
    FIX_RUN = "fix_run"
    LEDGER = "ledger"  # a task's review thread ledger changed (bot.events.ledger)
    # Not an event of the log: the client's Last-Event-ID is older than what the log keeps
    # (or the log restarted), so it reloads the Board and its sessions, then goes on live.
    RESYNC = "resync"


class SessionChange(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"
    SUMMARISED = "summarised"


class ResultKind(StrEnum):
    DELIVERED = "delivered"
    QUESTION = "question"
    FAILED = "failed"


RESULT_KIND = {
    TaskState.DELIVERED: ResultKind.DELIVERED,
    TaskState.WAITING_FOR_INFO: ResultKind.QUESTION,
    TaskState.FAILED: ResultKind.FAILED,
}


@dataclass(frozen=True)
class TaskChange:
    """One committed transition of a task, as the events stream reports it."""

    task_id: int
    state: str
    reason: str
    at: datetime


@dataclass(frozen=True)
class ReviewPicked:
    """A review run took review threads up (bot.lifecycle.review_pickup)."""

    task_id: int
    threads: list[str]  # "comment:<id>" / "review:<id>"
    at: datetime


@dataclass(frozen=True)
class FixRunStarted:
    """Failing CI on a task's pull request started fix run `run` of `of`."""

    task_id: int
    pr_number: int
    head_sha: str
    checks: tuple[str, ...]
    run: int
    of: int


@dataclass(frozen=True)
class ResultMessage:
    """A task result appended to a chat session (bot.lifecycle.delivery)."""

    message_id: str
    session_id: str
    task_id: int
    state: str
    text: str


class OperatorEvents:
    def __init__(self, log_: EventLog, db: Database) -> None:
        self.log = log_
        self.db = db
        self._owed = _OwedResyncs(self)

    # -- publishing (synchronous: called after commits, from any thread) ------------------

    def append(self, operator_ids: Iterable[int], type_: EventType, data: dict[str, Any]) -> None:
        for operator_id in operator_ids:
            for attempt in range(1, APPEND_ATTEMPTS + 1):
                try:
                    self.log.append(operator_id, type_.value, data)
                    break
                except Exception as exc:
                    if attempt == APPEND_ATTEMPTS:
                        log.warning(
                            "events: %s event for operator %s dropped: %s",
                            type_.value,
                            operator_id,
                            type(exc).__name__,
                        )
                        self.missed([operator_id])
                    else:
                        time.sleep(APPEND_BACKOFF_SECONDS * attempt)

    @property
    def owes_resyncs(self) -> bool:
        """Operators missed events and have not been told yet (the log is unreachable)."""
        return self._owed.owes()

    def missed(self, operator_ids: Iterable[int] | None) -> None:
        """These operators (None: every operator, when who could not even be read) missed
        an event: they are owed a `resync`, appended as soon as the log takes it. Known
        operators' debts are recorded in the database too, so they outlive this process."""
        if operator_ids is not None:
            operator_ids = list(operator_ids)
            try:
                self.db.call(_record_owed, operator_ids, datetime.now(UTC))
            except Exception as exc:  # the debt is still held in memory
                log.info("events: owed resyncs not recorded: %s", type(exc).__name__)
        self._owed.add(operator_ids)

    def pay_recorded(self, *, also: Collection[int] = ()) -> set[int]:
        """Append one `resync` to each operator with a debt recorded in the database (by any
        process, dead or alive) and to those in `also`, then delete the rows read. They are
        read first: a miss recorded once the resyncs went out is not covered by them, and
        stays. A database that cannot be read leaves `also` to be paid alone. The operators
        told; raises what the log raised (the rows stay: a debt paid twice is one reload
        more, never one less)."""
        try:
            rows = self.db.call(_owed_rows)
        except Exception as exc:
            if not also:
                raise
            log.info("events: recorded resyncs not read: %s", type(exc).__name__)
            rows = []
        told: set[int] = set()
        for operator_id in sorted(set(also) | {operator_id for _, operator_id in rows}):
            self.log.append(operator_id, EventType.RESYNC.value, MISSED)
            told.add(operator_id)
        if rows:
            try:
                self.db.call(_forget_owed, [row_id for row_id, _ in rows])
            except Exception as exc:  # paid all the same; the rows are paid again later
                log.info("events: paid resyncs not forgotten: %s", type(exc).__name__)
        return told

    def tasks_changed(self, changes: list[TaskChange]) -> None:
        if not changes:
            return
        rows, operators = self.db.call(_tasks_and_operators, {c.task_id for c in changes})
        for change in changes:
            task = rows.get(change.task_id)
            if task is not None:
                self.append(operators, EventType.TASK, task_payload(task, change))

    def reviews_picked(self, picked: list[ReviewPicked]) -> None:
        if not picked:
            return
        rows, operators = self.db.call(_tasks_and_operators, {p.task_id for p in picked})
        for each in picked:
            task = rows.get(each.task_id)
            if task is not None:
                self.append(operators, EventType.REVIEW, review_payload(task, each))

    def fix_runs_started(self, started: list[FixRunStarted]) -> None:
        if not started:
            return
        operators = self.db.call(_operator_ids)
        for item in started:
            self.append(operators, EventType.FIX_RUN, fix_run_payload(item))

    def results_delivered(self, results: list[ResultMessage]) -> None:
        if not results:
            return
        owners = self.db.call(_session_owners, {r.session_id for r in results})
        for result in results:
            owner = owners.get(result.session_id)
            if owner is not None:
                self.append([owner], EventType.RESULT, result_payload(result))

    def session_changed(self, operator_id: int, session_id: str, change: SessionChange) -> None:
        self.append(
            [operator_id], EventType.SESSION, {"session_id": session_id, "change": change.value}
        )

    # -- reading ------------------------------------------------------------------------

    async def stream(
        self, operator_id: int, *, after: int | None, heartbeat: float
    ) -> AsyncGenerator[Event | None, None]:
        """Events after `after` (None: from now on), then live ones, forever; None when a
        heartbeat is due. A gap yields one `resync` event carrying the newest id."""
        position = await self.log.last_id(operator_id) if after is None else after
        while True:
            batch = await self.log.read(operator_id, position, wait=heartbeat)
            if batch.gap:
                position = batch.last_id
                yield Event(position, EventType.RESYNC.value, {"reason": "events were missed"})
                continue
            if not batch.events:
                yield None
                continue
            for event in batch.events:
                position = event.id
                yield event


def settle_owed(within: float) -> bool:
    """Append every resync this process owes now, trying until `within` seconds have
    passed: for a process about to exit (a forked work horse after its job), whose timer
    threads die with it. True if nothing is owed any more."""
    deadline = time.monotonic() + within
    owing = [owed for owed in list(_EVERY_OWED) if owed.owes()]
    while owing:
        for owed in owing:
            owed.pay_now()
        owing = [owed for owed in owing if owed.owes()]
        left = deadline - time.monotonic()
        if not owing or left <= 0:
            break
        time.sleep(min(SETTLE_RETRY_SECONDS, left))
    return not owing


class _OwedResyncs:
    """Operators owed a `resync` event, and the timer thread that appends them."""

    def __init__(self, events: OperatorEvents) -> None:
        self._events = events
        self._forget()
        _EVERY_OWED.add(self)

    def _forget(self) -> None:
        """Nothing owed (also in a forked child: the parent pays its own debts, and a lock
        a parent's thread held at the fork would never be released in the child)."""
        self._lock = threading.Lock()
        self._operators: set[int] = set()
        self._everyone = False
        self._misses = 0  # bumped by every miss: a debt is paid only for misses before it
        self._attempt = 0
        self._timer: threading.Timer | None = None

    def owes(self) -> bool:
        with self._lock:
            return bool(self._operators) or self._everyone

    def pay_now(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self._pay()

    def add(self, operator_ids: Iterable[int] | None) -> None:
        with self._lock:
            self._misses += 1
            if operator_ids is None:
                self._everyone = True
            else:
                self._operators.update(operator_ids)
            if self._timer is None:
                self._attempt = 0
                self._schedule()

    def _schedule(self) -> None:  # with the lock held
        delay = min(RESYNC_BACKOFF_SECONDS * 2**self._attempt, RESYNC_BACKOFF_CAP_SECONDS)
        self._timer = threading.Timer(delay, self._pay)
        self._timer.daemon = True  # a debt never holds a process open
        self._timer.start()

    def _pay(self) -> None:
        with self._lock:
            operators, everyone, misses = set(self._operators), self._everyone, self._misses
        paid: set[int] = set()
        settled = False
        try:
            if everyone:
                operators |= set(self._events.db.call(_operator_ids))
            # What dead processes recorded goes with this process's own debt.
            paid = self._events.pay_recorded(also=operators)
            settled = True
        except Exception as exc:
            log.info("events: owed resyncs not appended yet: %s", type(exc).__name__)
        with self._lock:
            self._timer = None
            if misses == self._misses:  # nothing missed since: what was paid is settled
                self._operators -= paid
                self._everyone = self._everyone and not settled
            if not self._operators and not self._everyone:
                return
            self._attempt += 1
            if self._attempt > RESYNC_ATTEMPTS:
                log.error(
                    "events: %s operators were not told to reload after missed events",
                    "all" if self._everyone else len(self._operators),
                )
                self._operators.clear()
                self._everyone = False
                return
            self._schedule()


_EVERY_OWED: weakref.WeakSet[_OwedResyncs] = weakref.WeakSet()


def _forget_in_child() -> None:
    for owed in list(_EVERY_OWED):
        owed._forget()


os.register_at_fork(after_in_child=_forget_in_child)


def _record_owed(session: Session, operator_ids: list[int], at: datetime) -> None:
    """A row for each of these operators that exists (one deleted meanwhile owes nothing,
    and an unknown id must not fail the others' rows)."""
    known = select(Operator.id, literal(at, OwedResync.missed_at.type)).where(
        Operator.id.in_(operator_ids)
    )
    session.execute(insert(OwedResync).from_select(["operator_id", "missed_at"], known))


def _owed_rows(session: Session) -> list[tuple[int, int]]:
    rows = session.execute(select(OwedResync.id, OwedResync.operator_id).order_by(OwedResync.id))
    return [(row_id, operator_id) for row_id, operator_id in rows]


def _forget_owed(session: Session, row_ids: list[int]) -> None:
    for start in range(0, len(row_ids), FORGET_BATCH):  # bounded statements after long outages
        batch = row_ids[start : start + FORGET_BATCH]
        session.execute(delete(OwedResync).where(OwedResync.id.in_(batch)))


def _operator_ids(session: Session) -> list[int]:
    return list(session.scalars(select(Operator.id)))


def task_payload(task: Task, change: TaskChange) -> dict[str, Any]:
    return {
        "task_id": task.id,
        "repo": task.repo,
        "issue": task.issue,
        "title": task.title,
        "state": change.state,
        "pr_url": task.pr_url,
        "cost_usd": task.cost_usd,
        "tokens": task.tokens_used,
        "reason": change.reason,
        "updated_at": change.at.isoformat(),
    }


def review_payload(task: Task, picked: ReviewPicked) -> dict[str, Any]:
    return {
        "task_id": task.id,
        "repo": task.repo,
        "issue": task.issue,
        "pr_number": task.pr_number,
        "pr_url": task.pr_url,
        "threads": picked.threads,
        "at": picked.at.isoformat(),
    }


def fix_run_payload(item: FixRunStarted) -> dict[str, Any]:
    return {
        "task_id": item.task_id,
        "pr_number": item.pr_number,
        "head_sha": item.head_sha,
        "checks": list(item.checks),
        "run": item.run,
        "of": item.of,
    }


def result_payload(result: ResultMessage) -> dict[str, Any]:
    kind = RESULT_KIND.get(result.state, ResultKind.FAILED)  # type: ignore[call-overload]
    return {
        "session_id": result.session_id,
        "task_id": result.task_id,
        "kind": kind.value,
        "text": result.text[:RESULT_TEXT_LIMIT],
        "message_id": result.message_id,
    }


def _tasks_and_operators(session: Session, task_ids: set[int]) -> tuple[dict[int, Task], list[int]]:
    rows = {task.id: task for task in session.scalars(select(Task).where(Task.id.in_(task_ids)))}
    return rows, list(session.scalars(select(Operator.id)))


def _session_owners(session: Session, session_ids: set[str]) -> dict[str, int]:
    rows = session.execute(
        select(ChatSession.id, ChatSession.operator_id).where(ChatSession.id.in_(session_ids))
    )
    return {session_id: operator_id for session_id, operator_id in rows}
