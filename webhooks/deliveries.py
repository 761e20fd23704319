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

This module holds the records (tables, statuses, the typed values that cross modules); the
SQL that stores, claims and finishes deliveries is `webhooks.delivery_sql`, the operator's
view of the log (list, replay) `webhooks.delivery_log`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    Index,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from bot.db import Base
from webhooks.content_keys import MAX_CONTENT_KEY
from webhooks.stored_bodies import StoredBody

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
