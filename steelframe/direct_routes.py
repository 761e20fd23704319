"""Routes served straight from aiohttp's low-level server, before its URL dispatch and the
application's middleware chain: today only `POST /api/github/webhooks`.

A webhook delivery needs none of what the chain adds on every request (operator auth
applies to `/api/operator/` only; one resource, one method): on the webhook benchmark
(bench/README.md, "Webhook intake beside Probot") URL resolution, `Application._handle`
and the two middlewares were ~9% of the event loop's time per delivery. A package declares
such a route in `app[DIRECT_ROUTES]` (its handler must not need `request.app`, which
aiohttp sets while routing); it stays registered in the router too, so a test client,
another method (405) or a request with `Expect` (aiohttp's 100-continue) takes the usual
way. Errors are answered by the same `errors_middleware` as every other route: the same
request id, JSON shape and logging.

In its usual shape the webhook request does not reach aiohttp at all (`steelframe.lanes`);
this is its way when it comes in any other (chunked, `Expect`, after another request on
the same connection).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import cast

from aiohttp import hdrs, web

from http_edge.appkeys import DIRECT_ROUTES
from http_edge.errors import errors_middleware

# What aiohttp's low-level server calls with each request.
ServerHandler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


def direct_dispatch(app: web.Application, routed: ServerHandler) -> ServerHandler:
    """The server's request handler: a declared (method, path) goes to its handler through
    `errors_middleware` alone; anything else to `routed` (the application's own handler)."""
    declared = app.get(DIRECT_ROUTES) or {}
    if not declared:
        return routed
    direct = {
        key: functools.partial(errors_middleware, handler=handler)
        for key, handler in declared.items()
    }

    async def dispatch(request: web.BaseRequest) -> web.StreamResponse:
        # The path as sent: an encoded or absolute form, or a query, takes the routed way.
        handler = direct.get((request.method, request.raw_path))
        if handler is None or hdrs.EXPECT in request.headers:
            return await routed(request)
        # The application's request factory makes a web.Request of every request.
        return await handler(cast(web.Request, request))

    return dispatch
