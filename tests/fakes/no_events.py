"""A service without the operator events stream (an older one, or a proxy that does not pass
it): the real service, its `GET /api/operator/events` answered 404 as an unknown path is.
The clients must poll (the GUI) or say live updates stopped (the TUI), not retry forever."""

from __future__ import annotations

import asyncio

from aiohttp import web

from tests.fakes.service_middleware import Handler, ServiceMiddleware


class WithoutEvents(ServiceMiddleware):
    """Each GET of the events stream is counted (`asked`; `asked_event` is set at each) and
    answered 404 by the service's error middleware. Pass `plugins()` to `api_factory`, and
    read the service with a client that does not check answers against its OpenAPI document
    (a 404 is not one the stream declares)."""

    PATH = "/api/operator/events"

    def __init__(self) -> None:
        self.asked = 0
        self.asked_event = asyncio.Event()

    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "GET" and request.path == self.PATH:
            self.asked += 1
            self.asked_event.set()
            raise web.HTTPNotFound()
        response: web.StreamResponse = await handler(request)
        return response
