"""Small checks of request parameters that more than one HTTP shell needs (the core keeps
them, so the shells need not import each other)."""

from __future__ import annotations

import re

from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest

MAX_ISSUE = 2**31 - 1  # the issue columns are 32-bit integers (GitHub's numbers fit easily)
# Plain ASCII digits: int() also takes "1_000", " 12 ", "+5" and other scripts' digits
# ("٣" is 3), none of which a client means as a number here.
_DIGITS = re.compile(r"[0-9]{1,18}")


def ascii_int(raw: str) -> int | None:
    """`raw` as a non-negative integer written in ASCII digits, or None."""
    return int(raw) if _DIGITS.fullmatch(raw) else None


def bounded_int(raw: str | None, name: str, *, default: int, maximum: int) -> int:
    """A positive integer no larger than `maximum`; `default` when absent; else a 400."""
    if raw is None:
        return default
    value = ascii_int(raw)
    if value is None:
        raise BadRequest(f"{name} must be a positive integer", detail=ErrorDetail(field=name))
    if value <= 0 or value > maximum:
        raise BadRequest(f"{name} must be between 1 and {maximum}", detail=ErrorDetail(field=name))
    return value
