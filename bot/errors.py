"""The error tree: every domain error carries an HTTP status and a public message.

One middleware (`http_edge.errors`) turns these into `{"error": ..., "detail": ...}`.
The message is safe to show; internals go to the log with the request id, never the client.
The detail is typed (`bot.contracts.errors.ErrorDetail`): only the keys it declares reach
the wire.
"""

from __future__ import annotations

from typing import cast

import msgspec

from bot.contracts.errors import ErrorBody, ErrorDetail


def error_body(error: str, detail: ErrorDetail | None = None, *, code: str) -> dict[str, object]:
    """The JSON every HTTP error answer carries (docs/api.md, "Errors"), as builtins: each
    answer's encoder (aiohttp's `json.dumps`, a fast lane's orjson) writes it as before."""
    return cast(dict[str, object], msgspec.to_builtins(ErrorBody(error, code, detail)))


class SteelframeError(Exception):
    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, detail: ErrorDetail | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


# One class per status, each two declarations long: the repeated shape (a duplicates row) is
# the tree itself, so that callers raise and catch by name (`except NotFound`).
class BadRequest(SteelframeError):
    status = 400
    code = "bad_request"


class Unauthorized(SteelframeError):
    status = 401
    code = "unauthorized"


class Forbidden(SteelframeError):
    status = 403
    code = "forbidden"


class NotFound(SteelframeError):
    status = 404
    code = "not_found"


class RequestTimeout(SteelframeError):
    status = 408
    code = "request_timeout"


class Conflict(SteelframeError):
    status = 409
    code = "conflict"


class PayloadTooLarge(SteelframeError):
    status = 413
    code = "payload_too_large"


class TooManyRequests(SteelframeError):
    """Answered 429 with `Retry-After: retry_after` (seconds)."""

    status = 429
    code = "too_many_requests"

    def __init__(
        self, message: str, *, retry_after: int, detail: ErrorDetail | None = None
    ) -> None:
        # The detail says `retry_after` too, unless the raiser set it already.
        given = detail if detail is not None else ErrorDetail()
        if given.retry_after is msgspec.UNSET:
            given = msgspec.structs.replace(given, retry_after=retry_after)
        super().__init__(message, detail=given)
        self.retry_after = retry_after


class UpstreamError(SteelframeError):
    """A dependency (GitHub, a model) failed in a way the caller should see."""

    status = 502
    code = "upstream_error"


class Unavailable(SteelframeError):
    status = 503
    code = "unavailable"
