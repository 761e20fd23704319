"""The browser session's cookies and its CSRF check (double submit): the web GUI sets them
at sign-in, the operator API accepts them instead of a bearer token."""

from __future__ import annotations

from aiohttp import web

from bot.contracts.errors import ErrorDetail
from bot.errors import Forbidden
from bot.web_sessions import csrf_matches

SESSION_COOKIE = "steelframe_session"
CSRF_COOKIE = "steelframe_csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def require_csrf(request: web.Request, expected: str) -> None:
    """The header must equal the session's CSRF token and the CSRF cookie (double submit)."""
    header = request.headers.get(CSRF_HEADER)
    if not (csrf_matches(expected, header) and header == request.cookies.get(CSRF_COOKIE)):
        raise Forbidden(
            "missing or wrong CSRF token: send the X-CSRF-Token header the page was given",
            detail=ErrorDetail(header=CSRF_HEADER),
        )
