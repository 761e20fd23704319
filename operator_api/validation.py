"""The operator API's own field rules (chat sessions and focus); the generic ones are in
http_edge.validation."""

from __future__ import annotations

from typing import Any

from bot.chat.session_rows import UNSET
from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest
from http_edge.validation import issue_number


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
