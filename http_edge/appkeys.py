"""Typed aiohttp application keys shared by the HTTP shells and the entry package."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bot.unanswered import Unanswered

# Requests whose answer has not started; a started chat turn yields to them (bot.unanswered).
UNANSWERED = web.AppKey("unanswered", Unanswered)
# (method, path) -> a handler served before URL dispatch and middlewares (steelframe.direct_routes).
DIRECT_ROUTES = web.AppKey(
    "direct_routes", dict[tuple[str, str], Callable[[web.Request], Awaitable[web.StreamResponse]]]
)
# request line -> a route served on a fast lane in front of aiohttp (steelframe.lanes.LaneRoute;
# typed loosely here: the edge does not know the lane's HTTP types).
LANE_ROUTES = web.AppKey("lane_routes", dict[bytes, Any])
