"""The SQL that moves deliveries through the log (`webhooks.deliveries`): inserts as the
receiver stores them, claims, lease renewals and finishes as the processor works, written
as raw statements per dialect on the hot path."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import orjson
from sqlalchemy import Table, or_, select, update
from sqlalchemy.orm import Session

from bot.handler_runs import done_handlers
from webhooks.deliveries import (
    OK,
    REASON_LIMIT,
    Claimed,
    DeliveryBody,
    DeliveryStatus,
    Finished,
    NewDelivery,
    WebhookDelivery,
    load_outcomes,
)
from webhooks.stored_bodies import packed

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
