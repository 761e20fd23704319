"""Unauthenticated service routes: health and the OpenAPI description."""

from __future__ import annotations

from aiohttp import web

from bot import __version__
from bot.appkeys import SERVICES
from operator_api.openapi import openapi_document

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """Liveness: the process answers (200), whatever its dependencies say; a restart would
    not fix the database. The body still says how they are."""
    checks = await request.app[SERVICES].health()
    healthy = checks["database"] and checks["redis"] is not False
    return web.json_response(
        {"status": "ok" if healthy else "degraded", "version": __version__, **checks}
    )


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    """Readiness: 503 naming what is down, so a load balancer sends no traffic here."""
    checks = await request.app[SERVICES].readiness()
    ready = all(check["ok"] for check in checks.values())
    return web.json_response(
        {"status": "ready" if ready else "not_ready", "checks": checks},
        status=200 if ready else 503,
    )


@routes.get("/api/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())
