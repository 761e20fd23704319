"""Unauthenticated service routes: health, the OpenAPI description and its reference page."""

from __future__ import annotations

from aiohttp import web

from operator_api.deps import OPERATOR_API
from operator_api.json_answers import json_answer
from operator_api.openapi import OPENAPI_DOCUMENT, Endpoints, json_body, text_body
from operator_api.reference import render_reference
from operator_api.schemas import ref

endpoints = Endpoints()
routes = endpoints.routes


@endpoints.get(
    "/healthz",
    "Health: version, database and Redis reachability",
    {"200": json_body(ref("Health"))},
    auth=False,
)
async def healthz(request: web.Request) -> web.Response:
    """Liveness: the process answers (200), whatever its dependencies say; a restart would
    not fix the database. The body still says how they are."""
    return json_answer(await request.app[OPERATOR_API].readiness.health())


@endpoints.get(
    "/readyz",
    "Readiness: 200 when the database, Redis (if configured) and the memory index serve; "
    "503 naming what is down",
    {"200": json_body(ref("Readiness")), "503": json_body(ref("Readiness"), "Not ready")},
    auth=False,
)
async def readyz(request: web.Request) -> web.Response:
    """Readiness: 503 naming what is down, so a load balancer sends no traffic here."""
    ready = await request.app[OPERATOR_API].readiness.ready()
    return json_answer(ready, status=200 if ready.status == "ready" else 503)


@endpoints.get(
    "/api/openapi.json",
    "This document",
    {"200": json_body({"type": "object", "required": ["openapi", "info", "paths"]})},
    auth=False,
)
async def openapi(request: web.Request) -> web.Response:
    return web.json_response(request.app[OPENAPI_DOCUMENT])


@endpoints.get(
    "/api/docs",
    "The API reference: this document as a readable page",
    {"200": text_body("text/html", "HTML")},
    auth=False,
)
async def reference(request: web.Request) -> web.Response:
    # Rendered per request: a page people open now and then, from the app's own document.
    page = render_reference(request.app[OPENAPI_DOCUMENT])
    return web.Response(text=page, content_type="text/html")
