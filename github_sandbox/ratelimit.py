"""The sandbox's primary rate budget: requests counted per credential against GitHub's
hourly core limit, reported in `x-ratelimit-*` headers and by `GET /rate_limit`."""

from __future__ import annotations

RATE_LIMIT = 5000  # GitHub's hourly core budget for an installation
SEARCH_LIMIT = 30  # GitHub's per-minute search budget (the sandbox serves no search)


def budget(now: float, used: int, limit: int = RATE_LIMIT) -> dict[str, int]:
    """GitHub's `rate-limit` object: the budget resets at the top of the next hour."""
    epoch = int(now)
    return {
        "limit": limit,
        "remaining": max(limit - used, 0),
        "reset": epoch - epoch % 3600 + 3600,
        "used": used,
    }
