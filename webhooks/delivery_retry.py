"""How often and how long a failed webhook delivery is tried again (webhooks/processor.py)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

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
