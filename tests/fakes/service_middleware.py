"""The real service with one middleware of a test's in front of its routes: a test holds,
refuses or observes requests (`tests/fakes/turn_relay.py`, `tui.py`, `no_events.py`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

from aiohttp import web

from steelframe.server import AppPlugin, default_plugins

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ServiceMiddleware(ABC):
    """Subclasses say what happens around each request (`around`); pass `plugins()` to
    `api_factory` for the service with it in front."""

    def plugins(self) -> tuple[AppPlugin, ...]:
        return (*default_plugins(), AppPlugin(self._setup))

    def _setup(self, app: web.Application) -> None:
        app.middlewares.append(self._middleware)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        return await self.around(request, handler)

    @abstractmethod
    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The answer to `request`: the service's (`await handler(request)`) or the test's."""
