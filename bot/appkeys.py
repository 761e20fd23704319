"""Typed aiohttp application keys shared by the HTTP packages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from bot.services import Services

SERVICES = web.AppKey("services", Services)
# (method, path) -> a handler served before URL dispatch and middlewares (steelframe.direct_routes).
DIRECT_ROUTES = web.AppKey(
    "direct_routes", dict[tuple[str, str], Callable[[web.Request], Awaitable[web.StreamResponse]]]
)
