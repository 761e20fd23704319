"""Operator auth: every /api/operator/* request needs `Authorization: Bearer TOKEN`, or the
web GUI's session cookie (bot.web_sessions) plus, on state-changing methods, its CSRF token
in the `X-CSRF-Token` header (double submit: it must equal the CSRF cookie and the session's).

Checked before the body is read, so a flood of unauthenticated requests costs one header
parse each (and at most one indexed lookup for a wrong token). Failures are throttled per
client address and token prefix (`operator_api.throttle`): `checked` wraps every credential
check (bearer, cookie, the GUI's sign-ins).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import redis.asyncio as aioredis
from aiohttp import web

from bot.appkeys import SERVICES
from bot.config import Settings
from bot.db import Database
from bot.errors import Forbidden, Unauthorized
from bot.group_read import GroupRead
from bot.operators import hash_token, identities
from bot.web_sessions import csrf_matches, identify
from operator_api.middleware import Handler, answered, awaiting_answer
from operator_api.throttle import AuthThrottle, RedisStore, scopes_for

OPERATOR_ID = web.RequestKey("operator_id", int)
OPERATOR_NAME = web.RequestKey("operator_name", str)
PROTECTED_PREFIX = "/api/operator/"
CACHE_SECONDS = 30.0
SESSION_COOKIE = "steelframe_session"
CSRF_COOKIE = "steelframe_csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_T = TypeVar("_T")


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
AUTH_THROTTLE = web.AppKey("auth_throttle", AuthThrottle)


def auth_throttle(settings: Settings) -> AuthThrottle:
    """The service's throttle: its state in Redis when there is one (shared by instances)."""
    store = None
    if settings.redis_url:
        # Short timeouts: a Redis that does not answer must not hold a sign-in; the
        # throttle then counts in this process.
        client = aioredis.Redis.from_url(
            settings.redis_url, socket_timeout=1.0, socket_connect_timeout=1.0
        )
        store = RedisStore(client)
    return AuthThrottle(
        store,
        free_failures=settings.auth_free_failures,
        ceiling=settings.auth_backoff_ceiling_seconds,
    )


async def checked(request: web.Request, credential: str, verify: Callable[[], Awaitable[_T]]) -> _T:
    """`verify()` a credential under the throttle: 429 while its address or prefix is
    blocked (unless it was verified before), a failure (Unauthorized) counted."""
    throttle = request.app[AUTH_THROTTLE]
    digest = hash_token(credential)
    scopes = scopes_for(request.remote, credential)
    await throttle.before(digest, scopes)
    try:
        result = await verify()
    except Unauthorized:
        await throttle.failed(digest, scopes)
        raise
    await throttle.succeeded(digest)
    return result


def bearer_token(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token: send Authorization: Bearer TOKEN")
    return token.strip()


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


def require_csrf(request: web.Request, expected: str) -> None:
    """The header must equal the session's CSRF token and the CSRF cookie (double submit)."""
    header = request.headers.get(CSRF_HEADER)
    if not (csrf_matches(expected, header) and header == request.cookies.get(CSRF_COOKIE)):
        raise Forbidden(
            "missing or wrong CSRF token: send the X-CSRF-Token header the page was given",
            detail={"header": CSRF_HEADER},
        )
