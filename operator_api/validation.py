"""The operator API's own field rules (chat sessions and focus); the generic ones are in
http_edge.validation."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.chat.session_rows import UNSET
from bot.contracts.chat import MAX_REQUEST_KEY_CHARS
from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest
from http_edge.validation import issue_number, optional_str, storable_text


def optional_issue(data: dict[str, Any], name: str) -> Any:
    """UNSET when absent, None when null, else a positive integer."""
    if name not in data:
        return UNSET
    if data[name] is None:
        return None
    return issue_number(data[name], name)


def session_id(value: str, name: str = "session", *, kind: str = "session") -> str:
    """A session's (or, with `kind`, a turn's) id as the service makes them: 1 to 64 letters
    and digits."""
    if not (0 < len(value) <= 64) or not value.isalnum():
        raise BadRequest(f"{name} is not a valid {kind} id", detail=ErrorDetail(field=name))
    return value


def request_key(request: web.Request, data: dict[str, Any]) -> str | None:
    """The client's idempotency key: the `Idempotency-Key` header, else `request_id`."""
    header = request.headers.get("Idempotency-Key")
    field = "Idempotency-Key" if header is not None else "request_id"
    raw = header if header is not None else optional_str(data, "request_id", max_length=200)
    if raw is None:
        return None
    # The body's `request_id` was checked with the rest of the body (read_json); a header's
    # bytes that are not UTF-8 arrive as lone surrogates, which the key's digest could not
    # encode (bot.chat.turn_keys.row_key: a 500) nor a database store.
    storable_text(raw, field)
    if not raw.strip() or len(raw) > MAX_REQUEST_KEY_CHARS:
        raise BadRequest(
            f"{field} must be 1 to {MAX_REQUEST_KEY_CHARS} characters",
            detail=ErrorDetail(field=field),
        )
    return raw.strip()
