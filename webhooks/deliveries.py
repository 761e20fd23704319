"""The delivery log: every webhook GitHub sent, stored before it is acknowledged.

Keyed on `X-GitHub-Delivery` (a redelivery reuses the GUID), so a second copy is not
inserted. Status moves received -> processing (claimed atomically by one process, whose
claim expires `lease` seconds after its last renewal) -> processed | ignored | retrying
(a handler failed; `next_attempt_at` says when it runs again) -> ... -> dead (failed on its
last attempt: a dead letter, replayable by the operator). `rejected` is a delivery answered
400; `replayed` one whose content key (`webhooks.content_keys`) an earlier delivery had,
stored and never processed (`github_delivery_keys` holds each key's first delivery).
`outcomes` holds each handler's result (JSON: handler -> "ok" or the error), so a retry
runs only the handlers that have not succeeded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, cast

import orjson
from sqlalchemy import (
    BigInteger,
    Index,
    String,
    Table,
    Text,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.db import Base
from bot.handler_runs import done_handlers, forget_done
from webhooks.content_keys import MAX_CONTENT_KEY
from webhooks.stored_bodies import StoredBody, packed

MAX_DELIVERY_ID = 100
MAX_EVENT = 64
REASON_LIMIT = 1000
OK = "ok"  # a handler's outcome when it succeeded


class DeliveryStatus(StrEnum):
    RECEIVED = "received"
    PROCESSING = "processing"
    PROCESSED = "processed"
    IGNORED = "ignored"  # stored and acknowledged; no handler for this event/action
    RETRYING = "retrying"  # a handler failed; runs again at `next_attempt_at`
    DEAD = "dead"  # failed on its last attempt (or cannot be processed); `reason` says why
    REJECTED = "rejected"  # answered 400 (malformed, or missing what a handler needs)
    REPLAYED = "replayed"  # an earlier delivery's content under a new id: never processed


# What an operator means by "failed": given up on, or still being retried.
FAILED_STATUSES = (DeliveryStatus.DEAD, DeliveryStatus.RETRYING)


class WebhookDelivery(Base):
    __tablename__ = "github_deliveries"
    __table_args__ = (Index("ix_github_deliveries_status_received", "status", "received_at"),)

    delivery_id: Mapped[str] = mapped_column(String(MAX_DELIVERY_ID), primary_key=True)
    event: Mapped[str] = mapped_column(String(MAX_EVENT))
    action: Mapped[str | None] = mapped_column(String(MAX_EVENT))
    installation_id: Mapped[int | None] = mapped_column(BigInteger)
    repo: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text)
    received_at: Mapped[datetime]
    # Renewed by the owner's heartbeat while it works; older than the lease = owner died.
    claimed_at: Mapped[datetime | None]
    claimed_by: Mapped[str | None] = mapped_column(String(40))
    processed_at: Mapped[datetime | None]
    next_attempt_at: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(default=0)
    outcomes: Mapped[str | None] = mapped_column(Text)


class DeliveryBody(Base):
    """The body exactly as signed (UTF-8 text), so it can be re-verified and re-parsed. In a
    table of its own, written once: SQLite rewrites a whole row on every status change,
    and with the body (~8 KB) in it the two status changes of each delivery were two thirds
    of the database's work under load. Compressed on SQLite (`webhooks.stored_bodies`)."""

    __tablename__ = "github_delivery_bodies"

    delivery_id: Mapped[str] = mapped_column(String(MAX_DELIVERY_ID), primary_key=True)
    body: Mapped[str] = mapped_column(StoredBody)


class DeliveryKey(Base):
    """Each content key and the first delivery that carried it: a later delivery with the
    key is a replay (`webhooks.content_keys`)."""

    __tablename__ = "github_delivery_keys"

    content_key: Mapped[str] = mapped_column(String(MAX_CONTENT_KEY), primary_key=True)
    delivery_id: Mapped[str] = mapped_column(String(MAX_DELIVERY_ID))


@dataclass(frozen=True)
class NewDelivery:
    delivery_id: str
    event: str
    action: str | None
    installation_id: int | None
    repo: str | None
    body: str
    received_at: datetime
    status: DeliveryStatus = DeliveryStatus.RECEIVED
    reason: str | None = None
    content_key: str | None = None  # None: never a replay (a rejected delivery)

    def row(self) -> dict[str, Any]:
        return {
            "delivery_id": self.delivery_id,
            "event": self.event,
            "action": self.action,
            "installation_id": self.installation_id,
            "repo": self.repo,
            "status": str(self.status),
            "reason": self.reason,
            "received_at": self.received_at,
            "attempts": 0,
        }


@dataclass(frozen=True)
class Finished:
    """One attempt's result. `outcomes` maps each handler run so far to "ok" or its error;
    `retry_at` is set when status is RETRYING."""

    delivery_id: str
    status: DeliveryStatus
    reason: str | None = None
    outcomes: dict[str, str] = field(default_factory=dict)
    retry_at: datetime | None = None


@dataclass(frozen=True)
class Claimed:
    """A stored delivery taken for processing by the sweep: its attempt number (1-based)
    and what its handlers did on earlier attempts."""

    delivery_id: str
    event: str
    body: str
    attempt: int
    outcomes: dict[str, str]


def load_outcomes(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


_COLUMNS = (
    "delivery_id",
    "event",
    "action",
    "installation_id",
    "repo",
    "status",
    "reason",
    "received_at",
    "attempts",
)


# Each column's array type for PostgreSQL's unnest (see `insert_statements`).
_PG_ARRAYS = (
    "text[]",
    "text[]",
    "text[]",
    "bigint[]",
    "text[]",
    "text[]",
    "text[]",
    "timestamp[]",
    "int[]",
)
_CONFLICT = " ON CONFLICT (delivery_id) DO NOTHING"
_KEY_CONFLICT = " ON CONFLICT (content_key) DO NOTHING"
_REPLAYED_REASON = "an earlier delivery carried the same content: "


def insert_statements(
    dialect: str, deliveries: Sequence[NewDelivery]
) -> list[tuple[str, Sequence[Any]]]:
    """The writer's hot path, for a DBAPI cursor, in one transaction: each content key
    (kept only for its first delivery), each body, and each row (INSERT ... ON CONFLICT DO
    NOTHING), stored as `replayed` when an earlier delivery had its content key. The last
    statement writes the rows and returns (delivery_id, status) of those that were new. A
    body already stored (a redelivery) is left as it is.

    PostgreSQL: one statement, one round trip (the keys' and the bodies' INSERTs
    data-modifying WITHs), one array per column through unnest, so its text is the same
    whatever the batch size and psycopg parses and prepares it once (a text per size, each
    hundreds of placeholders long, was parsed again on most batches). SQLite has neither:
    multi-row VALUES with qmarks (its statement cache keeps each size's plan)."""
    rows = [_values(dialect, delivery) for delivery in deliveries]
    ids = [delivery.delivery_id for delivery in deliveries]
    keys = [delivery.content_key for delivery in deliveries]
    bodies = [packed(dialect, delivery.body) for delivery in deliveries]
    if dialect != "sqlite":
        return [_pg_insert(rows, ids, keys, bodies)]
    return _sqlite_inserts(rows, ids, keys, bodies)


def _status_of(column: dict[str, str], first: str) -> str:
    """The SELECT list of the rows' INSERT: status and reason say `replayed` when `first`
    (an SQL condition: this row's key is new, or was kept for this very delivery) fails."""
    status = f"CASE WHEN {first} THEN {column['status']} ELSE '{DeliveryStatus.REPLAYED}' END"
    reason = (
        f"CASE WHEN {first} THEN {column['reason']} "
        f"ELSE '{_REPLAYED_REASON}' || {column['key']} END"
    )
    values = {**column, "status": status, "reason": reason}
    return ", ".join(values[name] for name in _COLUMNS)


def _pg_insert(
    rows: list[tuple[Any, ...]], ids: list[str], keys: list[str | None], bodies: list[Any]
) -> tuple[str, Sequence[Any]]:
    arrays = ", ".join(f"%b::{kind}" for kind in (*_PG_ARRAYS, "text[]"))
    columns = [list(column) for column in zip(*rows, strict=True)] if rows else []
    # The main statement does not see the rows its WITHs insert, only what they return:
    # a row is first when its (key, id) pair was inserted just now by `kept`.
    first = "(u.key IS NULL OR u.delivery_id IN (SELECT delivery_id FROM kept))"
    column = {name: f"u.{name}" for name in (*_COLUMNS, "key")}
    sql = (
        "WITH kept AS (INSERT INTO github_delivery_keys (content_key, delivery_id) "
        "SELECT k, i FROM unnest(%b::text[], %b::text[]) AS n(k, i) WHERE k IS NOT NULL"
        f"{_KEY_CONFLICT} RETURNING delivery_id), "
        "bodies AS (INSERT INTO github_delivery_bodies (delivery_id, body) "
        f"SELECT * FROM unnest(%b::text[], %b::text[]){_CONFLICT}) "
        f"INSERT INTO github_deliveries ({', '.join(_COLUMNS)}) "
        f"SELECT {_status_of(column, first)} FROM unnest({arrays}) "
        f"AS u({', '.join(_COLUMNS)}, key){_CONFLICT} RETURNING delivery_id, status"
    )
    return sql, [keys, ids, ids, bodies, *(columns or [[]] * len(_COLUMNS)), keys]


def _sqlite_inserts(
    rows: list[tuple[Any, ...]], ids: list[str], keys: list[str | None], bodies: list[Any]
) -> list[tuple[str, Sequence[Any]]]:
    # VALUES names its columns column1, column2, ...; the key comes last. A row is first
    # when its key was kept for its own id by the statement before (same transaction).
    column = {name: f"column{i}" for i, name in enumerate((*_COLUMNS, "key"), start=1)}
    first = (
        f"({column['key']} IS NULL OR EXISTS (SELECT 1 FROM github_delivery_keys k "
        f"WHERE k.content_key = {column['key']} AND k.delivery_id = {column['delivery_id']}))"
    )
    one = "(" + ", ".join(["?"] * (len(_COLUMNS) + 1)) + ")"
    pairs = [(key, delivery) for key, delivery in zip(keys, ids, strict=True) if key is not None]
    statements: list[tuple[str, Sequence[Any]]] = []
    if pairs:
        statements.append(
            (
                "INSERT INTO github_delivery_keys (content_key, delivery_id) VALUES "
                + ", ".join(["(?, ?)"] * len(pairs))
                + _KEY_CONFLICT,
                [value for pair in pairs for value in pair],
            )
        )
    statements.append(
        (
            "INSERT INTO github_delivery_bodies (delivery_id, body) VALUES "
            + ", ".join(["(?, ?)"] * len(rows))
            + _CONFLICT,
            [value for pair in zip(ids, bodies, strict=True) for value in pair],
        )
    )
    # `WHERE true`: SQLite's parser needs it between INSERT ... SELECT and ON CONFLICT.
    statements.append(
        (
            f"INSERT INTO github_deliveries ({', '.join(_COLUMNS)}) "
            f"SELECT {_status_of(column, first)} FROM (VALUES {', '.join([one] * len(rows))}) "
            f"WHERE true{_CONFLICT} RETURNING delivery_id, status",
            [value for row, key in zip(rows, keys, strict=True) for value in (*row, key)],
        )
    )
    return statements


def _values(dialect: str, delivery: NewDelivery) -> tuple[Any, ...]:
    """One row's values in `_COLUMNS` order."""
    return (
        delivery.delivery_id,
        delivery.event,
        delivery.action,
        delivery.installation_id,
        delivery.repo,
        str(delivery.status),
        delivery.reason,
        db_time(dialect, delivery.received_at),
        0,
    )


def db_time(dialect: str, value: datetime) -> Any:
    """A timestamp as `UTCDateTime` stores it, for a DBAPI cursor: naive UTC, and on SQLite
    SQLAlchemy's text format for DateTime (PostgreSQL takes the value)."""
    naive = value.astimezone(UTC).replace(tzinfo=None)
    # isoformat, not strftime: the same text at less than half the cost (per delivery).
    return naive.isoformat(" ", "microseconds") if dialect == "sqlite" else naive


def _ids_condition(dialect: str, ids: Sequence[str]) -> tuple[str, list[Any]]:
    """`delivery_id IN (...)` for a DBAPI cursor: one array parameter on PostgreSQL (one
    statement text whatever the count, so psycopg can prepare it), qmarks on SQLite."""
    if dialect == "sqlite":
        return f"delivery_id IN ({', '.join('?' * len(ids))})", list(ids)
    return "delivery_id = ANY(%s)", [list(ids)]


def claim_statement(
    dialect: str, delivery_ids: Sequence[str], now: datetime, owner: str
) -> tuple[str, list[Any]]:
    """Take deliveries still `received` for `owner` (the processor's hot path); it returns
    the ids taken."""
    mark = "?" if dialect == "sqlite" else "%s"
    condition, ids = _ids_condition(dialect, delivery_ids)
    return (
        f"UPDATE github_deliveries SET status = {mark}, claimed_at = {mark}, "
        f"claimed_by = {mark}, attempts = attempts + 1 WHERE status = {mark} AND {condition} "
        "RETURNING delivery_id",
        [
            DeliveryStatus.PROCESSING.value,
            db_time(dialect, now),
            owner,
            DeliveryStatus.RECEIVED.value,
            *ids,
        ],
    )


def bodies_statement(dialect: str, delivery_ids: Sequence[str]) -> tuple[str, list[Any]]:
    """The stored bodies of these deliveries: (delivery_id, body) rows, each body as
    `webhooks.stored_bodies.unpacked` reads it."""
    condition, ids = _ids_condition(dialect, delivery_ids)
    return f"SELECT delivery_id, body FROM github_delivery_bodies WHERE {condition}", ids


def renew_statement(
    dialect: str, owner: str, delivery_ids: Sequence[str], now: datetime
) -> tuple[str, list[Any]]:
    """The heartbeat: the claims `owner` still holds on these deliveries are good for
    another lease (one whose claim was taken over stays with its new owner)."""
    mark = "?" if dialect == "sqlite" else "%s"
    condition, ids = _ids_condition(dialect, delivery_ids)
    return (
        f"UPDATE github_deliveries SET claimed_at = {mark} "
        f"WHERE {condition} AND claimed_by = {mark} AND status = {mark}",
        [db_time(dialect, now), *ids, owner, DeliveryStatus.PROCESSING.value],
    )


def finish_statements(
    dialect: str, results: Sequence[Finished], now: datetime, owner: str
) -> list[tuple[str, list[Any]]]:
    """Record outcomes: one UPDATE per (status, reason, outcomes), so a batch that went well
    is a statement or two however long it is; a retry has its own due time. Only claims
    `owner` still holds are written (one whose claim expired was taken over: the new owner
    records it)."""
    mark = "?" if dialect == "sqlite" else "%s"
    statements = []
    for (status, reason, outcomes, retry_at), delivery_ids in _outcomes(results).items():
        condition, ids = _ids_condition(dialect, delivery_ids)
        statements.append(
            (
                f"UPDATE github_deliveries SET status = {mark}, reason = {mark}, "
                f"outcomes = {mark}, next_attempt_at = {mark}, processed_at = {mark}, "
                f"claimed_by = NULL WHERE {condition} AND claimed_by = {mark} "
                f"AND status = {mark}",
                [
                    status,
                    reason,
                    outcomes,
                    None if retry_at is None else db_time(dialect, retry_at),
                    db_time(dialect, now),
                    *ids,
                    owner,
                    DeliveryStatus.PROCESSING.value,
                ],
            )
        )
    return statements


OutcomeKey = tuple[str, str | None, str | None, datetime | None]


def _outcomes(results: Sequence[Finished]) -> dict[OutcomeKey, list[str]]:
    groups: dict[OutcomeKey, list[str]] = {}
    for r in results:
        reason = None if r.reason is None else r.reason[:REASON_LIMIT]
        outcomes = (
            orjson.dumps(r.outcomes, option=orjson.OPT_SORT_KEYS).decode() if r.outcomes else None
        )
        key = (str(r.status), reason, outcomes, r.retry_at)
        groups.setdefault(key, []).append(r.delivery_id)
    return groups


def claim_stale(
    session: Session, *, now: datetime, grace: float, lease: float, limit: int, owner: str
) -> list[Claimed]:
    """Deliveries nobody is processing, claimed for `owner` and returned oldest first:
    `received` for longer than `grace` seconds (their process died after acknowledging),
    `retrying` whose next attempt is due, or `processing` whose claim was not renewed for
    `lease` seconds (its process died mid-way)."""
    received_before = now - timedelta(seconds=grace)
    lease_before = now - timedelta(seconds=lease)
    d = WebhookDelivery
    takeable = or_(
        (d.status == DeliveryStatus.RECEIVED) & (d.received_at <= received_before),
        (d.status == DeliveryStatus.RETRYING) & (d.next_attempt_at <= now),
        (d.status == DeliveryStatus.PROCESSING) & (d.claimed_at <= lease_before),
    )
    candidates = list(
        session.scalars(
            select(d.delivery_id)
            .where(takeable)
            .order_by(d.received_at, d.delivery_id)
            .limit(limit)
        )
    )
    if not candidates:
        return []
    # One conditional UPDATE is the atomic step: a row another process claimed (or renewed)
    # meanwhile no longer matches `takeable`, so each row has one owner.
    taken = set(
        session.scalars(
            update(d)
            .where(d.delivery_id.in_(candidates), takeable)
            .values(
                status=DeliveryStatus.PROCESSING,
                claimed_at=now,
                claimed_by=owner,
                attempts=d.attempts + 1,
            )
            .returning(d.delivery_id)
        )
    )
    if not taken:
        return []
    rows = session.execute(
        select(d.delivery_id, d.event, DeliveryBody.body, d.attempts, d.outcomes)
        .join(DeliveryBody, DeliveryBody.delivery_id == d.delivery_id)
        .where(d.delivery_id.in_(taken))
        .order_by(d.received_at, d.delivery_id)
    ).all()
    # A handler whose effect committed is done, even if the process died before it recorded
    # the delivery's outcome.
    done = done_handlers(session, list(taken))
    return [
        Claimed(
            row.delivery_id,
            row.event,
            row.body,
            row.attempts,
            load_outcomes(row.outcomes) | dict.fromkeys(done.get(row.delivery_id, ()), OK),
        )
        for row in rows
    ]


def claim(session: Session, delivery_ids: Sequence[str], *, now: datetime, owner: str) -> list[str]:
    """Atomically take deliveries still `received` (one process wins each)."""
    if not delivery_ids:
        return []
    table = cast(Table, WebhookDelivery.__table__)
    result = session.execute(
        update(table)
        .where(
            table.c.delivery_id.in_(delivery_ids),
            table.c.status == DeliveryStatus.RECEIVED,
        )
        .values(
            status=DeliveryStatus.PROCESSING,
            claimed_at=now,
            claimed_by=owner,
            attempts=table.c.attempts + 1,
        )
        .returning(table.c.delivery_id)
    )
    return list(result.scalars())


class Replay(StrEnum):
    QUEUED = "queued"
    UNKNOWN = "unknown"
    # rejected (fix the cause, redeliver), a replay of another delivery, or in progress
    NOT_REPLAYABLE = "not_replayable"


def requeue(session: Session, delivery_id: str) -> Replay:
    """Process a finished delivery again (operator action), at the next sweep. A dead or
    retrying one keeps the outcomes of handlers that succeeded, so only the failed ones
    run; a processed one runs every handler again."""
    d = WebhookDelivery
    row = session.get(d, delivery_id, with_for_update=True)
    if row is None:
        return Replay.UNKNOWN
    if row.status in (
        DeliveryStatus.REJECTED,
        DeliveryStatus.PROCESSING,
        DeliveryStatus.REPLAYED,  # its content was processed as the earlier delivery
    ):
        return Replay.NOT_REPLAYABLE
    if row.status not in FAILED_STATUSES:
        row.outcomes = None
        forget_done(session, delivery_id)
    row.status = DeliveryStatus.RECEIVED
    row.reason = None
    row.claimed_at = None
    row.claimed_by = None
    row.next_attempt_at = None
    row.attempts = 0
    return Replay.QUEUED


def failed_ids(session: Session, *, limit: int = 10_000) -> list[str]:
    """Dead deliveries, oldest first (what `replay --failed` takes)."""
    return list(
        session.scalars(
            select(WebhookDelivery.delivery_id)
            .where(WebhookDelivery.status == DeliveryStatus.DEAD)
            .order_by(WebhookDelivery.received_at)
            .limit(limit)
        )
    )


@dataclass(frozen=True)
class DeliverySummary:
    delivery_id: str
    event: str
    action: str | None
    repo: str | None
    status: str
    reason: str | None
    attempts: int
    outcomes: dict[str, str]
    received_at: datetime
    processed_at: datetime | None
    next_attempt_at: datetime | None

    def public(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        return {
            "delivery": self.delivery_id,
            "event": self.event,
            "action": self.action,
            "repo": self.repo,
            "status": self.status,
            "reason": self.reason,
            "attempts": self.attempts,
            "handlers": self.outcomes,
            "received_at": iso(self.received_at),
            "processed_at": iso(self.processed_at),
            "next_attempt_at": iso(self.next_attempt_at),
        }


def list_deliveries(
    session: Session, *, statuses: Sequence[str] = (), limit: int = 20
) -> list[DeliverySummary]:
    """Newest first, optionally only some statuses (no bodies: they can be 25 MB)."""
    d = WebhookDelivery
    query = select(
        d.delivery_id,
        d.event,
        d.action,
        d.repo,
        d.status,
        d.reason,
        d.attempts,
        d.outcomes,
        d.received_at,
        d.processed_at,
        d.next_attempt_at,
    ).order_by(d.received_at.desc(), d.delivery_id)
    if statuses:
        query = query.where(d.status.in_(list(statuses)))
    return [
        DeliverySummary(
            row.delivery_id,
            row.event,
            row.action,
            row.repo,
            row.status,
            row.reason,
            row.attempts,
            load_outcomes(row.outcomes),
            row.received_at,
            row.processed_at,
            row.next_attempt_at,
        )
        for row in session.execute(query.limit(limit))
    ]
