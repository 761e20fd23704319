"""How often and how long a failed webhook delivery is tried again (webhooks/processor.py),
and which retries this process is still to run."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from webhooks.deliveries import DeliveryStatus, Finished

# Its own generator: a retry's jitter never moves (or depends on) the global `random` state,
# which a program sharing the process may seed and replay (Hypothesis does, per example).
_JITTER = random.Random()


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts per delivery and the waits between them: base * 2**(n-1), capped, times a
    random factor in [1 - jitter, 1] so deliveries that failed together do not all come
    back at once. Defaults: 8 attempts over 5 to 10 minutes."""

    max_attempts: int = 8
    base_delay: float = 5.0
    max_delay: float = 600.0
    jitter: float = 0.5

    def delay(self, attempt: int, *, rng: Callable[[], float] = _JITTER.random) -> float:
        """Seconds before attempt `attempt + 1` after attempt `attempt` (1-based) failed."""
        full = min(self.base_delay * 2.0 ** (attempt - 1), self.max_delay)
        return full * (1.0 - self.jitter * rng())


class ScheduledRetries:
    """The retries this process scheduled and has not seen end: each delivery's next
    attempt time. `DeliveryProcessor` sleeps its sweep until the earliest and `drain`
    waits for them; each change has one place: `recorded` (results just committed: a retry
    scheduled or moved, or the delivery finished) and `forget_due` (a sweep that claimed
    every due retry did not find these: another instance took them, or an operator's
    replay made them `received` again)."""

    def __init__(self) -> None:
        self._due: dict[str, datetime] = {}

    def recorded(self, results: Iterable[Finished]) -> bool:
        """Note results the database now holds; True when a retry falls due before every
        one noted so far (the sweep sleeping until the earliest must wake up sooner)."""
        earliest = self.earliest()
        sooner = False
        for result in results:
            if result.status == DeliveryStatus.RETRYING and result.retry_at is not None:
                self._due[result.delivery_id] = result.retry_at
                sooner = sooner or earliest is None or result.retry_at < earliest
            else:  # processed, ignored or dead: nothing more to wait for
                self._due.pop(result.delivery_id, None)
        return sooner

    def forget_due(self, by: datetime) -> None:
        """After a sweep whose last claim, at `by`, took nothing: a retry due by then that
        is still noted is not this process's to run. The sweep recorded what it claimed
        before that claim (a retry moved to before `by` would have been taken by it);
        another instance took the rest, or an operator's replay made them `received`. One
        that a concurrent sweep here holds is noted again if its result is a retry."""
        self._due = {key: at for key, at in self._due.items() if at > by}

    def earliest(self) -> datetime | None:
        return min(self._due.values(), default=None)

    def waiting(self, by: datetime | None) -> bool:
        """Whether a retry is due by `by` (any at all when None)."""
        return any(by is None or at <= by for at in self._due.values())
