"""/api/operator/spend: each repository's spend per UTC day (issue 34), for the
Dashboard's chart; a thin handler over `bot.lifecycle.budget_ledger`."""

from __future__ import annotations

from datetime import timedelta

from aiohttp import web

from bot.lifecycle import budget_ledger
from http_edge.validation import query_int
from operator_api.deps import OPERATOR_API
from operator_api.openapi import Endpoints, errors, json_body, query
from operator_api.schemas import ref

endpoints = Endpoints()
routes = endpoints.routes
MAX_DAYS = 90


@endpoints.get(
    "/api/operator/spend",
    "Each repository's spend per UTC day (tokens and USD as the agents reported them)",
    {"200": json_body(ref("Spend")), **errors(400, 401)},
    params=[query("days", {"type": "integer", "minimum": 1, "maximum": MAX_DAYS}, "last N days")],
)
async def spend(request: web.Request) -> web.Response:
    days = query_int(request, "days", default=14, maximum=MAX_DAYS)
    today = request.app[OPERATOR_API].clock().replace(hour=0, minute=0, second=0, microsecond=0)
    since = today - timedelta(days=days - 1)
    found = await request.app[OPERATOR_API].db.run(budget_ledger.daily, since)
    return web.json_response({"days": days, "spend": [day.as_json() for day in found]})
