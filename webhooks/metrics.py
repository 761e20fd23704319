"""Scrape-time figures of the delivery log: deliveries by status, how long the oldest one
not yet processed has waited, and handler retries."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.db import Database
from bot.metrics import Collector, Metrics
from webhooks.deliveries import DeliveryStatus, WebhookDelivery

WAITING = (DeliveryStatus.RECEIVED, DeliveryStatus.PROCESSING)


def _figures(session: Session) -> tuple[dict[str, float], datetime | None, int]:
    rows = session.execute(
        select(WebhookDelivery.status, func.count()).group_by(WebhookDelivery.status)
    )
    counts = {str(status): float(count) for status, count in rows}
    oldest = session.scalar(
        select(func.min(WebhookDelivery.received_at)).where(WebhookDelivery.status.in_(WAITING))
    )
    retries = session.scalar(
        select(func.coalesce(func.sum(WebhookDelivery.attempts - 1), 0)).where(
            WebhookDelivery.attempts > 1
        )
    )
    return counts, oldest, int(retries or 0)


def delivery_collector(db: Database, clock: Callable[[], datetime]) -> Collector:
    async def deliveries(metrics: Metrics) -> None:
        counts, oldest, retries = await db.run(_figures)
        metrics.set_counts(metrics.deliveries, counts, tuple(s.value for s in DeliveryStatus))
        lag = 0.0 if oldest is None else (clock() - _aware(oldest, clock())).total_seconds()
        metrics.delivery_lag.set(max(lag, 0.0))
        metrics.delivery_retries.set(retries)

    return deliveries


def _aware(moment: datetime, now: datetime) -> datetime:
    """SQLite gives naive UTC datetimes back; compare like with like."""
    return moment.replace(tzinfo=now.tzinfo) if moment.tzinfo is None else moment
