"""When to retry a GitHub request and how long to wait first (sans-I/O, no clock of its own).

GitHub docs, "Rate limits for the REST API" -> "Handling rate limit errors": a 403 or 429
is a rate limit when `x-ratelimit-remaining` is 0 (primary) or it carries `retry-after`
or says "secondary rate limit". Wait `retry-after` seconds if given, else until
`x-ratelimit-reset` when the remaining count is 0, else at least a minute; if it keeps
failing, wait exponentially longer and give up after a bounded number of tries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

RATE_LIMIT_STATUSES = frozenset({403, 429})
# 5xx answers GitHub documents as transient; 501 "not implemented" is not.
RETRYABLE_SERVER_STATUSES = frozenset({500, 502, 503, 504})


class Verdict(StrEnum):
    OK = "ok"
    SERVER_ERROR = "server_error"
    RATE_LIMITED = "rate_limited"
    FAIL = "fail"


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    # 5xx and network errors: base_delay * 2**(n-1), capped at max_delay.
    base_delay: float = 1.0
    max_delay: float = 60.0
    # GitHub: "wait for at least one minute" when no header says how long.
    rate_limit_floor: float = 60.0
    # A single wait longer than this fails the call instead of blocking it (an exhausted
    # primary limit can mean most of an hour); the error carries when to come back.
    max_wait: float = 900.0


def classify(status: int, headers: Mapping[str, str], message: str) -> Verdict:
    if 200 <= status < 300:
        return Verdict.OK
    if status in RETRYABLE_SERVER_STATUSES:
        return Verdict.SERVER_ERROR
    if status in RATE_LIMIT_STATUSES and (
        status == 429
        or headers.get("x-ratelimit-remaining") == "0"
        or "retry-after" in headers
        or "rate limit" in message.lower()
    ):
        return Verdict.RATE_LIMITED
    return Verdict.FAIL


def rate_limit_wait(
    headers: Mapping[str, str], *, now: float, strike: int, policy: RetryPolicy
) -> float:
    """Seconds to wait after the `strike`-th consecutive rate-limit answer (1-based)."""
    wait: float | None = _number(headers.get("retry-after"))
    if wait is None and headers.get("x-ratelimit-remaining") == "0":
        reset = _number(headers.get("x-ratelimit-reset"))
        if reset is not None:
            wait = reset - now + 1.0  # the reset second itself may still be limited
    if wait is None:
        wait = policy.rate_limit_floor
    if strike > 1:
        wait = max(wait, policy.rate_limit_floor * 2 ** (strike - 1))
    return max(wait, 0.0)


def server_error_wait(headers: Mapping[str, str], *, attempt: int, policy: RetryPolicy) -> float:
    """Seconds to wait after the `attempt`-th failed try (1-based) on a 5xx or network error."""
    told = _number(headers.get("retry-after"))
    if told is not None:
        return max(told, 0.0)
    return float(min(policy.base_delay * 2 ** (attempt - 1), policy.max_delay))


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None
