"""`GET /metrics`: Prometheus text exposition of this process (bot/metrics.py).

Protected: with STEELFRAME_METRICS_TOKEN set, a scraper sends it as a bearer token; without
it, only clients on this machine (loopback) may scrape, so figures never leak by default."""

from __future__ import annotations

import hmac
import ipaddress

from aiohttp import web

from bot.appkeys import SERVICES
from bot.errors import Forbidden
from bot.metrics import CONTENT_TYPE
from operator_api.openapi import Endpoints, errors, text_body

endpoints = Endpoints()
routes = endpoints.routes


def _allowed(request: web.Request) -> bool:
    expected = request.app[SERVICES].settings.metrics_token
    if expected:
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(sent.encode(), expected.reveal().encode())
    try:
        return ipaddress.ip_address(request.remote or "").is_loopback
    except ValueError:
        return False


@endpoints.get(
    "/metrics",
    "Prometheus metrics of this process (docs/deploy.md): bearer STEELFRAME_METRICS_TOKEN, or "
    "clients on this machine when it is unset",
    {"200": text_body("text/plain", "Prometheus text exposition"), **errors(403)},
    auth=False,
)
async def metrics(request: web.Request) -> web.Response:
    if not _allowed(request):
        raise Forbidden(
            "metrics are for this machine or a scraper with STEELFRAME_METRICS_TOKEN",
            detail={"header": "Authorization"},
        )
    body = await request.app[SERVICES].metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})
