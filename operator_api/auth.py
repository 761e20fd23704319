"""Operator auth: every /api/operator/* request needs `Authorization: Bearer TOKEN`, or the
web GUI's session cookie (bot.web_sessions) plus, on state-changing methods, its CSRF token
in the `X-CSRF-Token` header (double submit: it must equal the CSRF cookie and the session's).

Checked before the body is read, so a flood of unauthenticated requests costs one header
parse each (and at most one indexed lookup for a wrong token). Failures are throttled per
client address and token prefix (`http_edge.credentials.checked`, shared with the GUI's
sign-ins); the cookie and CSRF names are the edge's (`http_edge.cookies`).
"""

from __future__ import annotations

import time

from aiohttp import web

from bot.db import Database
from bot.errors import Unauthorized
from bot.group_read import GroupRead
from bot.operators import hash_token, identities
from bot.web_sessions import identify
from http_edge.answers import answered, awaiting_answer
from http_edge.appkeys import SERVICES
from http_edge.cookies import SAFE_METHODS, SESSION_COOKIE, require_csrf
from http_edge.credentials import OPERATOR_ID, OPERATOR_NAME, bearer_token, checked
from http_edge.errors import Handler

PROTECTED_PREFIX = "/api/operator/"
CACHE_SECONDS = 30.0


class TokenCache:
    """Recently verified token digests -> (operator id, name), so a busy client does not
    hit the database on every request. Short-lived: a rotated token stops working soon.
    Tokens not cached are looked up together (bot.group_read): 1,000 operators opening
    chat streams within a second cost a few statements, not 1,000."""

    def __init__(self, db: Database) -> None:
        self._entries: dict[str, tuple[float, int, str]] = {}
        self._lookups = GroupRead(db, identities)

    async def operator(self, token: str) -> tuple[int, str]:
        """The token's operator, or Unauthorized."""
        digest = hash_token(token)
        cached = self.get(digest)
        if cached is not None:
            return cached
        identity = await self._lookups.get(digest)
        if identity is None:
            raise Unauthorized("invalid bearer token")
        self.put(digest, identity.id, identity.name)
        return identity.id, identity.name

    def get(self, digest: str) -> tuple[int, str] | None:
        entry = self._entries.get(digest)
        if entry is None or time.monotonic() - entry[0] > CACHE_SECONDS:
            return None
        return entry[1], entry[2]

    def put(self, digest: str, operator_id: int, name: str) -> None:
        if len(self._entries) > 10_000:
            self._entries.clear()
        self._entries[digest] = (time.monotonic(), operator_id, name)


TOKEN_CACHE = web.AppKey("token_cache", TokenCache)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith(PROTECTED_PREFIX):
        return await handler(request)
    # Operators' requests are what a started chat turn yields to (bot/unanswered.py).
    awaiting_answer(request)
    try:
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie and "Authorization" not in request.headers:
            request[OPERATOR_ID], request[OPERATOR_NAME] = await checked(
                request, cookie, lambda: cookie_operator(request, cookie)
            )
            return await handler(request)
        token = bearer_token(request)
        identity = await checked(request, token, lambda: request.app[TOKEN_CACHE].operator(token))
        request[OPERATOR_ID], request[OPERATOR_NAME] = identity
        return await handler(request)
    finally:
        answered(request)  # a no-op once its answer has started (on_response_prepare)


async def cookie_operator(request: web.Request, cookie: str) -> tuple[int, str]:
    """The signed-in browser's operator; unsafe methods must carry the CSRF token too.
    Not cached: signing out must end the session at once."""
    identity = await request.app[SERVICES].db.run_first(identify, cookie)
    if request.method not in SAFE_METHODS:
        require_csrf(request, identity.csrf_token)
    return identity.operator_id, identity.operator_name
