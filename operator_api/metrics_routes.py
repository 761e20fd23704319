"""`GET /metrics`: Prometheus text exposition of this process (bot/metrics.py).

Always needs STEELFRAME_METRICS_TOKEN as a bearer token: nothing is trusted for coming from
this machine (a coding run with network, another user on the host), and without the setting
nobody may scrape. Wrong tokens are throttled as operator tokens are
(`http_edge.credentials.checked`)."""

from __future__ import annotations

import hmac

from aiohttp import web

from bot.contracts.errors import ErrorDetail
from bot.errors import Unauthorized
from bot.metrics import CONTENT_TYPE
from bot.operators import credential_bytes
from http_edge.credentials import checked
from operator_api.deps import OPERATOR_API
from operator_api.openapi import Endpoints, errors, text_body

endpoints = Endpoints()
routes = endpoints.routes


async def _verify(expected: str, sent: str) -> None:
    # Whatever bytes the header carried (`credential_bytes`): a wrong token, never a 500.
    if not hmac.compare_digest(credential_bytes(sent), credential_bytes(expected)):
        raise Unauthorized(
            "metrics need STEELFRAME_METRICS_TOKEN as a bearer token",
            detail=ErrorDetail(header="Authorization"),
        )


@endpoints.get(
    "/metrics",
    "Prometheus metrics of this process (docs/deploy.md): bearer STEELFRAME_METRICS_TOKEN, "
    "always (unset: nobody may scrape)",
    {"200": text_body("text/plain", "Prometheus text exposition"), **errors(401, 429)},
    auth=False,
)
async def metrics(request: web.Request) -> web.Response:
    expected = request.app[OPERATOR_API].settings.metrics_token
    if expected is None:
        raise Unauthorized(
            "metrics are off: set STEELFRAME_METRICS_TOKEN and send it as a bearer token",
            detail=ErrorDetail(setting="STEELFRAME_METRICS_TOKEN"),
        )
    sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    await checked(request, sent, lambda: _verify(expected.reveal(), sent))
    body = await request.app[OPERATOR_API].metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})
