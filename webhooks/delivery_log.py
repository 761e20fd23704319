"""The operator's view of the delivery log (`webhooks.deliveries`): what is there, which
failed, and replaying one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.handler_runs import forget_done
from webhooks.deliveries import FAILED_STATUSES, DeliveryStatus, WebhookDelivery, load_outcomes


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
