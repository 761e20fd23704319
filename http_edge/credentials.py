"""An operator's credentials at the edge: who the request is (set by the operator API's
auth middleware, read by every shell), the bearer token's header, and `checked`, which puts
every credential check (bearer, cookie, the GUI's sign-ins, the metrics token) under the
failed-authentication throttle (`http_edge.throttle`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiohttp import web

from bot.config import Settings
from bot.errors import Unauthorized
from bot.operators import hash_token
from bot.redis_clients import CancellableRedis
from http_edge.throttle import AuthThrottle, RedisStore, scopes_for

OPERATOR_ID = web.RequestKey("operator_id", int)
OPERATOR_NAME = web.RequestKey("operator_name", str)
# The check that let the request in, to make again (fresh, not from a cache): a long-lived
# response (the events stream) asks it now and then, so a revoked token or an ended
# browser sign-in stops it too (operator_api/events_routes.py). Unauthorized: it no longer
# opens the API.
Recheck = Callable[[], Awaitable[tuple[int, str]]]
RECHECK: web.RequestKey[Recheck] = web.RequestKey("credential_recheck")
AUTH_THROTTLE = web.AppKey("auth_throttle", AuthThrottle)
_T = TypeVar("_T")


def auth_throttle(settings: Settings) -> AuthThrottle:
    """The service's throttle: its state in Redis when there is one (shared by instances)."""
    store = None
    if settings.redis_url:
        # Short timeouts: a Redis that does not answer must not hold a sign-in; the
        # throttle then counts in this process.
        client = CancellableRedis.from_url(
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
