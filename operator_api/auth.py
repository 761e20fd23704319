"""Operator auth: every /api/operator/* request needs `Authorization: Bearer TOKEN`, or the
web GUI's session cookie (bot.web_sessions) plus, on state-changing methods, its CSRF token
in the `X-CSRF-Token` header (double submit: it must equal the CSRF cookie and the session's).

Checked before the body is read, so a flood of unauthenticated requests costs one header
parse each (and at most one indexed lookup for a wrong token). Failures are throttled per
client address and token prefix (`http_edge.credentials.checked`, shared with the GUI's
sign-ins); the cookie and CSRF names are the edge's (`http_edge.cookies`).
"""

from __future__ import annotations

from aiohttp import web

from bot.web_sessions import identify
from http_edge.answers import answered, awaiting_answer
from http_edge.cookies import SAFE_METHODS, SESSION_COOKIE, require_csrf
from http_edge.credentials import OPERATOR_ID, OPERATOR_NAME, RECHECK, bearer_token, checked
from http_edge.errors import Handler
from operator_api.deps import OPERATOR_API

PROTECTED_PREFIX = "/api/operator/"


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
            request[RECHECK] = lambda: cookie_operator(request, cookie)  # never cached
            return await handler(request)
        token = bearer_token(request)
        tokens = request.app[OPERATOR_API].tokens
        identity = await checked(request, token, lambda: tokens.operator(token))
        request[OPERATOR_ID], request[OPERATOR_NAME] = identity
        request[RECHECK] = lambda: tokens.operator(token, fresh=True)
        return await handler(request)
    finally:
        answered(request)  # a no-op once its answer has started (on_response_prepare)


async def cookie_operator(request: web.Request, cookie: str) -> tuple[int, str]:
    """The signed-in browser's operator; unsafe methods must carry the CSRF token too.
    Not cached: signing out must end the session at once."""
    identity = await request.app[OPERATOR_API].db.run_first(identify, cookie)
    if request.method not in SAFE_METHODS:
        require_csrf(request, identity.csrf_token)
    return identity.operator_id, identity.operator_name
