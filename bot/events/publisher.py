"""What the operator events stream carries, and to whom (docs/api.md, "Events"); the
frames are the Structs of `bot.contracts.events`.

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
from datetime import UTC, datetime

from sqlalchemy import delete, insert, literal, select
from sqlalchemy.orm import Session

from bot.contracts.events import (
    MISSED_REASON,
    EventFrame,
    ResultFrame,
    ResyncFrame,
    SessionChange,
    SessionFrame,
    TaskFrame,
)
from bot.db import Database
from bot.events.log import Event, EventLog
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
MISSED = ResyncFrame(reason=MISSED_REASON)
FORGET_BATCH = 1000  # paid debts deleted per statement
RESULT_TEXT_LIMIT = 4000


class OperatorEvents:
    def __init__(self, log_: EventLog, db: Database) -> None:
        self.log = log_
        self.db = db
        self._owed = _OwedResyncs(self)

    # -- publishing (synchronous: called after commits, from any thread) ------------------

    def append(self, operator_ids: Iterable[int], frame: EventFrame) -> None:
        for operator_id in operator_ids:
            for attempt in range(1, APPEND_ATTEMPTS + 1):
                try:
                    self.log.append(operator_id, frame)
                    break
                except Exception as exc:
                    if attempt == APPEND_ATTEMPTS:
                        log.warning(
                            "events: %s event for operator %s dropped: %s",
                            type(frame).__name__,
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
            self.log.append(operator_id, MISSED)
            told.add(operator_id)
        if rows:
            try:
                self.db.call(_forget_owed, [row_id for row_id, _ in rows])
            except Exception as exc:  # paid all the same; the rows are paid again later
                log.info("events: paid resyncs not forgotten: %s", type(exc).__name__)
        return told

    def tasks_changed(self, frames: list[TaskFrame]) -> None:
        """Committed task transitions, to every operator (the Board is shared)."""
        if not frames:
            return
        operators = self.db.call(_operator_ids)
        for frame in frames:
            self.append(operators, frame)

    def to_everyone(self, frames: list[EventFrame]) -> None:
        """Frames about the shared Board (review pickups, fix runs, ledgers): every operator."""
        if not frames:
            return
        operators = self.db.call(_operator_ids)
        for frame in frames:
            self.append(operators, frame)

    def results_delivered(self, frames: list[ResultFrame]) -> None:
        """Task results written to chat sessions, each to its session's operator."""
        if not frames:
            return
        owners = self.db.call(_session_owners, {frame.session_id for frame in frames})
        for frame in frames:
            owner = owners.get(frame.session_id)
            if owner is not None:
                self.append([owner], frame)

    def session_changed(self, operator_id: int, session_id: str, change: SessionChange) -> None:
        self.append([operator_id], SessionFrame(session_id=session_id, change=change))

    # -- reading ------------------------------------------------------------------------

    async def start_at(self, operator_id: int, *, after: int | None) -> int:
        """Where a stream starts: `after`, or (None) the newest id, "now". It reads the log
        either way, so a log that cannot be read fails here (`Unavailable`), before an SSE
        response has sent its headers, as a 503 the client can read."""
        newest = await self.log.last_id(operator_id)
        return newest if after is None else after

    async def stream(
        self, operator_id: int, *, after: int | None, heartbeat: float
    ) -> AsyncGenerator[Event | None, None]:
        """Events after `after` (None: from now on), then live ones, forever; None when a
        heartbeat is due. A gap yields one `resync` event carrying the newest id. A log that
        can no longer be read (its Redis failed) raises `Unavailable` and ends the stream."""
        position = await self.log.last_id(operator_id) if after is None else after
        while True:
            batch = await self.log.read(operator_id, position, wait=heartbeat)
            if batch.gap:
                position = batch.last_id
                yield Event(position, ResyncFrame(id=position, reason=MISSED_REASON))
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


def _session_owners(session: Session, session_ids: set[str]) -> dict[str, int]:
    rows = session.execute(
        select(ChatSession.id, ChatSession.operator_id).where(ChatSession.id.in_(session_ids))
    )
    return {session_id: operator_id for session_id, operator_id in rows}
