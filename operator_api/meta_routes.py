"""Unauthenticated service routes: health and the OpenAPI description."""

from __future__ import annotations

from aiohttp import web

from bot import __version__
from bot.appkeys import SERVICES
from operator_api.openapi import openapi_document

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    checks = await request.app[SERVICES].health()
    healthy = checks["database"] and checks["redis"] is not False
    return web.json_response(
        {"status": "ok" if healthy else "degraded", "version": __version__, **checks}
    )


@routes.get("/api/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())
