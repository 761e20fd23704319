"""/api/operator/deliveries: the webhook delivery log for the operator (dead letters first
of all), and replaying a delivery. Thin handlers over `webhooks.deliveries`."""

from __future__ import annotations

from aiohttp import web

from bot.appkeys import SERVICES
from bot.errors import BadRequest, Conflict, NotFound
from webhooks.deliveries import FAILED_STATUSES, MAX_DELIVERY_ID, Replay, list_deliveries, requeue
from webhooks.operator_openapi import LIST_PATH, MAX_LIST, REPLAY_PATH, STATUS_FILTERS

routes = web.RouteTableDef()
DEFAULT_LIST = 50


def statuses_for(raw: str | None) -> list[str]:
    if raw is None:
        return []
    if raw == "failed":
        return [s.value for s in FAILED_STATUSES]
    if raw not in STATUS_FILTERS:
        raise BadRequest(
            f"status must be one of {', '.join(STATUS_FILTERS)}",
            detail={"field": "status", "allowed": list(STATUS_FILTERS)},
        )
    return [raw]


def limit_of(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIST
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 4) or not 1 <= int(raw) <= MAX_LIST:
        raise BadRequest(f"limit must be between 1 and {MAX_LIST}", detail={"field": "limit"})
    return int(raw)


@routes.get(LIST_PATH)
async def list_route(request: web.Request) -> web.Response:
    statuses = statuses_for(request.query.get("status"))
    limit = limit_of(request.query.get("limit"))
    db = request.app[SERVICES].db
    found = await db.run(list_deliveries, statuses=statuses, limit=limit)
    return web.json_response({"deliveries": [d.public() for d in found]})


@routes.post(REPLAY_PATH)
async def replay_route(request: web.Request) -> web.Response:
    delivery_id = request.match_info["id"]
    # Printable only: a NUL cannot even be compared on PostgreSQL (it would be a 500).
    if not 0 < len(delivery_id) <= MAX_DELIVERY_ID or not delivery_id.isprintable():
        raise BadRequest("delivery id is missing, too long or unprintable", detail={"field": "id"})
    result = await request.app[SERVICES].db.run(requeue, delivery_id)
    if result is Replay.UNKNOWN:
        raise NotFound(f"no delivery {delivery_id!r}", detail={"delivery": delivery_id})
    if result is Replay.NOT_REPLAYABLE:
        raise Conflict(
            "rejected deliveries and deliveries being processed cannot be replayed",
            detail={"delivery": delivery_id},
        )
    return web.json_response({"delivery": delivery_id, "status": "received"})
