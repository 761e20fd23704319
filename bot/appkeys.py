"""Typed aiohttp application keys shared by the HTTP packages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bot.services import Services

SERVICES = web.AppKey("services", Services)
# (method, path) -> a handler served before URL dispatch and middlewares (steelframe.direct_routes).
DIRECT_ROUTES = web.AppKey(
    "direct_routes", dict[tuple[str, str], Callable[[web.Request], Awaitable[web.StreamResponse]]]
)
# request line -> a route served on a fast lane in front of aiohttp (steelframe.lanes.LaneRoute;
# typed loosely here: the core does not know the lane's HTTP types).
LANE_ROUTES = web.AppKey("lane_routes", dict[bytes, Any])
