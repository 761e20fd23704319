"""Requests a coding run's egress proxy refused: counted once per host per run while it runs,
stored on the task after it, and summarised for the pull request and the operators."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint, func, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.clock import Clock
from bot.db import Base

MAX_HOSTS_SHOWN = 3
# A run that hammers thousands of hosts keeps this many rows; the rest are counted.
MAX_HOSTS_KEPT = 200
OTHER_HOSTS = "(other hosts)"


@dataclass(frozen=True)
class BlockedHost:
    """Refused requests to one host in one run: when the first came, where, how many."""

    host: str
    port: int
    first_at: datetime
    count: int
    reason: str
    attempt: int = 0  # the run's attempt, once stored


class BlockedLog:
    """One run's refusals, once per host (later ones only count)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._hosts: dict[str, BlockedHost] = {}

    def add(self, host: str, port: int, reason: str) -> None:
        known = self._hosts.get(host)
        if known is None and len(self._hosts) >= MAX_HOSTS_KEPT:
            host, known = OTHER_HOSTS, self._hosts.get(OTHER_HOSTS)
        if known is None:
            self._hosts[host] = BlockedHost(host, port, self._clock(), 1, reason[:300])
            return
        self._hosts[host] = BlockedHost(
            known.host, known.port, known.first_at, known.count + 1, known.reason
        )

    def hosts(self) -> list[BlockedHost]:
        return list(self._hosts.values())


class EgressBlocked(Base):
    """A host a run's egress proxy refused, with how often (one row per host per run)."""

    __tablename__ = "egress_blocked"
    __table_args__ = (
        UniqueConstraint("task_id", "generation", "attempt", "host", name="uq_egress_blocked"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    generation: Mapped[int]
    attempt: Mapped[int]
    host: Mapped[str] = mapped_column(String(255))
    port: Mapped[int]
    count: Mapped[int]
    reason: Mapped[str] = mapped_column(String(300))
    first_at: Mapped[datetime]


def add(
    session: Session, task_id: int, generation: int, attempt: int, found: Sequence[BlockedHost]
) -> None:
    """Add a step's refusals (setup, the test command, the agent) to the run's record: one
    row per host, counts summed, so each finished step is added exactly once."""
    for blocked in found:
        row = session.scalar(
            select(EgressBlocked).where(
                EgressBlocked.task_id == task_id,
                EgressBlocked.generation == generation,
                EgressBlocked.attempt == attempt,
                EgressBlocked.host == blocked.host,
            )
        )
        if row is not None:
            row.count += blocked.count
            continue
        session.add(
            EgressBlocked(
                task_id=task_id,
                generation=generation,
                attempt=attempt,
                host=blocked.host,
                port=blocked.port,
                count=blocked.count,
                reason=blocked.reason,
                first_at=blocked.first_at,
            )
        )


def of_task(session: Session, task_id: int, *, generation: int | None = None) -> list[BlockedHost]:
    """The task's refusals (of one generation when given), in the order they first came."""
    query = select(EgressBlocked).where(EgressBlocked.task_id == task_id)
    if generation is not None:
        query = query.where(EgressBlocked.generation == generation)
    rows = session.scalars(query.order_by(EgressBlocked.first_at, EgressBlocked.id))
    return [BlockedHost(r.host, r.port, r.first_at, r.count, r.reason, r.attempt) for r in rows]


def total(session: Session) -> int:
    """Requests refused over all runs (for /metrics)."""
    return int(session.scalar(select(func.coalesce(func.sum(EgressBlocked.count), 0))) or 0)


def summary(found: Sequence[BlockedHost]) -> str:
    """One line for the pull request: "blocked: 3 requests to `example.org`", or "".

    Host names are the runtime's choice: in code spans, so GitHub links and mentions none."""
    if not found:
        return ""
    by_host: dict[str, int] = {}
    for blocked in found:
        by_host[blocked.host] = by_host.get(blocked.host, 0) + blocked.count
    requests = sum(by_host.values())
    named = sorted(by_host, key=lambda host: (-by_host[host], host))
    shown = ", ".join(f"`{host}`" for host in named[:MAX_HOSTS_SHOWN])
    more = len(named) - MAX_HOSTS_SHOWN
    hosts = f"{shown} and {more} more" if more > 0 else shown
    return f"blocked: {requests} request{'s' if requests != 1 else ''} to {hosts}"


def summary_for(session: Session, task_id: int, generation: int) -> str:
    """The summary line of what this leg of the task's runs had refused, or ""."""
    return summary(of_task(session, task_id, generation=generation))
