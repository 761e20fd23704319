"""Small checks of request parameters that more than one HTTP shell needs (the core keeps
them, so the shells need not import each other)."""

from __future__ import annotations

from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest


def bounded_int(raw: str | None, name: str, *, default: int, maximum: int) -> int:
    """A positive integer no larger than `maximum`; `default` when absent; else a 400."""
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(
            f"{name} must be a positive integer", detail=ErrorDetail(field=name)
        ) from None
    if value <= 0 or value > maximum:
        raise BadRequest(f"{name} must be between 1 and {maximum}", detail=ErrorDetail(field=name))
    return value
