"""The delivery log: every webhook GitHub sent, stored before it is acknowledged.

Keyed on `X-GitHub-Delivery` (a redelivery reuses the GUID), so a second copy is not
inserted. Status moves received -> processing (claimed atomically, so one process handles
a delivery) -> processed | ignored | failed; `rejected` is a delivery answered 400.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Index,
    String,
    Table,
    Text,
    select,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.db import Base

MAX_DELIVERY_ID = 100
MAX_EVENT = 64
REASON_LIMIT = 1000


class DeliveryStatus(StrEnum):
    RECEIVED = "received"
    PROCESSING = "processing"
    PROCESSED = "processed"
    IGNORED = "ignored"  # stored and acknowledged; no handler for this event/action
    FAILED = "failed"  # a handler raised; `reason` says why
    REJECTED = "rejected"  # answered 400 (malformed, or missing what a handler needs)


class WebhookDelivery(Base):
    __tablename__ = "github_deliveries"
    __table_args__ = (Index("ix_github_deliveries_status_received", "status", "received_at"),)

    delivery_id: Mapped[str] = mapped_column(String(MAX_DELIVERY_ID), primary_key=True)
    event: Mapped[str] = mapped_column(String(MAX_EVENT))
    action: Mapped[str | None] = mapped_column(String(MAX_EVENT))
    installation_id: Mapped[int | None] = mapped_column(BigInteger)
    repo: Mapped[str | None] = mapped_column(String(200))
    # The body exactly as signed (UTF-8 text), so it can be re-verified and re-parsed.
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text)
    received_at: Mapped[datetime]
    claimed_at: Mapped[datetime | None]
    processed_at: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(default=0)


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

    def row(self) -> dict[str, Any]:
        return {
            "delivery_id": self.delivery_id,
            "event": self.event,
            "action": self.action,
            "installation_id": self.installation_id,
            "repo": self.repo,
            "body": self.body,
            "status": str(self.status),
            "reason": self.reason,
            "received_at": self.received_at,
            "attempts": 0,
        }


@dataclass(frozen=True)
class Finished:
    delivery_id: str
    status: DeliveryStatus
    reason: str | None = None


_COLUMNS = (
    "delivery_id",
    "event",
    "action",
    "installation_id",
    "repo",
    "body",
    "status",
    "reason",
    "received_at",
    "attempts",
)


def insert_statement(dialect: str, rows: int) -> str:
    """The multi-row INSERT ... ON CONFLICT DO NOTHING RETURNING for a DBAPI cursor
    (qmark for sqlite3, format for psycopg): the writer's hot path, one round trip."""
    mark = "?" if dialect == "sqlite" else "%s"
    one = "(" + ", ".join([mark] * len(_COLUMNS)) + ")"
    return (
        f"INSERT INTO github_deliveries ({', '.join(_COLUMNS)}) VALUES "
        + ", ".join([one] * rows)
        + " ON CONFLICT (delivery_id) DO NOTHING RETURNING delivery_id"
    )


def insert_parameters(dialect: str, deliveries: Sequence[NewDelivery]) -> list[Any]:
    params: list[Any] = []
    for delivery in deliveries:
        row = delivery.row()
        row["received_at"] = db_time(dialect, row["received_at"])
        params.extend(row[column] for column in _COLUMNS)
    return params


def db_time(dialect: str, value: datetime) -> Any:
    """A timestamp as `UTCDateTime` stores it, for a DBAPI cursor: naive UTC, and on SQLite
    SQLAlchemy's text format for DateTime (PostgreSQL takes the value)."""
    naive = value.astimezone(UTC).replace(tzinfo=None)
    return naive.strftime("%Y-%m-%d %H:%M:%S.%f") if dialect == "sqlite" else naive


def _ids_condition(dialect: str, ids: Sequence[str]) -> tuple[str, list[Any]]:
    """`delivery_id IN (...)` for a DBAPI cursor: one array parameter on PostgreSQL (one
    statement text whatever the count, so psycopg can prepare it), qmarks on SQLite."""
    if dialect == "sqlite":
        return f"delivery_id IN ({', '.join('?' * len(ids))})", list(ids)
    return "delivery_id = ANY(%s)", [list(ids)]


def claim_statement(
    dialect: str, delivery_ids: Sequence[str], now: datetime
) -> tuple[str, list[Any]]:
    """`claim` for a DBAPI cursor (the processor's hot path); it returns the ids taken."""
    mark = "?" if dialect == "sqlite" else "%s"
    condition, ids = _ids_condition(dialect, delivery_ids)
    return (
        f"UPDATE github_deliveries SET status = {mark}, claimed_at = {mark}, "
        f"attempts = attempts + 1 WHERE status = {mark} AND {condition} "
        "RETURNING delivery_id",
        [
            DeliveryStatus.PROCESSING.value,
            db_time(dialect, now),
            DeliveryStatus.RECEIVED.value,
            *ids,
        ],
    )


def finish_statements(
    dialect: str, results: Sequence[Finished], now: datetime
) -> list[tuple[str, list[Any]]]:
    """`finish` for a DBAPI cursor: one UPDATE per (status, reason)."""
    mark = "?" if dialect == "sqlite" else "%s"
    statements = []
    for (status, reason), delivery_ids in _outcomes(results).items():
        condition, ids = _ids_condition(dialect, delivery_ids)
        statements.append(
            (
                f"UPDATE github_deliveries SET status = {mark}, reason = {mark}, "
                f"processed_at = {mark} WHERE {condition}",
                [status, reason, db_time(dialect, now), *ids],
            )
        )
    return statements


def _outcomes(results: Sequence[Finished]) -> dict[tuple[str, str | None], list[str]]:
    groups: dict[tuple[str, str | None], list[str]] = {}
    for r in results:
        reason = None if r.reason is None else r.reason[:REASON_LIMIT]
        groups.setdefault((str(r.status), reason), []).append(r.delivery_id)
    return groups


def claim(session: Session, delivery_ids: Sequence[str], *, now: datetime) -> list[str]:
    """Atomically take deliveries still `received` (one process wins each)."""
    if not delivery_ids:
        return []
    table = cast(Table, WebhookDelivery.__table__)
    # A Core UPDATE (no ORM session synchronisation): this runs for every batch.
    result = session.execute(
        update(table)
        .where(
            table.c.delivery_id.in_(delivery_ids),
            table.c.status == DeliveryStatus.RECEIVED,
        )
        .values(
            status=DeliveryStatus.PROCESSING,
            claimed_at=now,
            attempts=table.c.attempts + 1,
        )
        .returning(table.c.delivery_id)
    )
    return list(result.scalars())


def claim_stale(
    session: Session, *, now: datetime, grace: float, lease: float, limit: int
) -> list[tuple[str, str, str]]:
    """Deliveries nobody is processing: `received` for longer than `grace` seconds (their
    process died after acknowledging), or `processing` past the `lease` (it died while
    processing). Claims and returns them oldest first as (id, event, body)."""
    received_before = now - timedelta(seconds=grace)
    lease_before = now - timedelta(seconds=lease)
    candidates = session.execute(
        select(WebhookDelivery.delivery_id, WebhookDelivery.status)
        .where(
            (
                (WebhookDelivery.status == DeliveryStatus.RECEIVED)
                & (WebhookDelivery.received_at <= received_before)
            )
            | (
                (WebhookDelivery.status == DeliveryStatus.PROCESSING)
                & (WebhookDelivery.claimed_at <= lease_before)
            )
        )
        .order_by(WebhookDelivery.received_at, WebhookDelivery.delivery_id)
        .limit(limit)
    ).all()
    stale = [row.delivery_id for row in candidates if row.status == DeliveryStatus.PROCESSING]
    if stale:
        # Back to `received` first, so the one claim below is the atomic step for both kinds.
        session.execute(
            update(WebhookDelivery)
            .where(
                WebhookDelivery.delivery_id.in_(stale),
                WebhookDelivery.status == DeliveryStatus.PROCESSING,
                WebhookDelivery.claimed_at <= lease_before,
            )
            .values(status=DeliveryStatus.RECEIVED)
        )
    taken = set(claim(session, [row.delivery_id for row in candidates], now=now))
    if not taken:
        return []
    rows = session.execute(
        select(WebhookDelivery.delivery_id, WebhookDelivery.event, WebhookDelivery.body)
        .where(WebhookDelivery.delivery_id.in_(taken))
        .order_by(WebhookDelivery.received_at, WebhookDelivery.delivery_id)
    ).all()
    return [(row.delivery_id, row.event, row.body) for row in rows]


def finish(session: Session, results: Sequence[Finished], *, now: datetime) -> None:
    """Record outcomes: one UPDATE per (status, reason), so a batch that went well is one
    statement however long it is."""
    table = cast(Table, WebhookDelivery.__table__)
    for (status, reason), ids in _outcomes(results).items():
        session.execute(
            update(table)
            .where(table.c.delivery_id.in_(ids))
            .values(status=status, reason=reason, processed_at=now)
        )


def requeue(session: Session, delivery_id: str) -> bool:
    """Put a failed (or any finished) delivery back to be processed again (operator action)."""
    result = session.execute(
        update(WebhookDelivery)
        .where(
            WebhookDelivery.delivery_id == delivery_id,
            WebhookDelivery.status != DeliveryStatus.REJECTED,
        )
        .values(status=DeliveryStatus.RECEIVED, reason=None, claimed_at=None)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
