"""/api/operator/deliveries: the webhook delivery log for the operator (dead letters first
of all), and replaying a delivery. Thin handlers over `webhooks.delivery_log`."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest, Conflict, NotFound
from bot.params import bounded_int
from webhooks.deliveries import FAILED_STATUSES, MAX_DELIVERY_ID, DeliveryStatus
from webhooks.delivery_log import Replay, list_deliveries, requeue
from webhooks.deps import WEBHOOKS

routes = web.RouteTableDef()
LIST_PATH = "/api/operator/deliveries"
REPLAY_PATH = "/api/operator/deliveries/{id}/replay"
MAX_LIST = 500
# `failed` is what an operator asks for: dead letters and deliveries still being retried.
STATUS_FILTERS = [*(s.value for s in DeliveryStatus), "failed"]


def statuses_for(raw: str | None) -> list[str]:
    if raw is None or raw == "":
        return []
    if raw == "failed":
        return [s.value for s in FAILED_STATUSES]
    if raw not in STATUS_FILTERS:
        raise BadRequest(
            f"status must be one of {', '.join(STATUS_FILTERS)}",
            detail=ErrorDetail(field="status", allowed=STATUS_FILTERS),
        )
    return [raw]


@routes.get(LIST_PATH)
async def list_route(request: web.Request) -> web.Response:
    statuses = statuses_for(request.query.get("status"))
    limit = bounded_int(request.query.get("limit"), "limit", default=50, maximum=MAX_LIST)
    db = request.app[WEBHOOKS].db
    found = await db.run(list_deliveries, statuses=statuses, limit=limit)
    return web.json_response({"deliveries": [d.public() for d in found]})


@routes.post(REPLAY_PATH)
async def replay_route(request: web.Request) -> web.Response:
    delivery_id = request.match_info["id"]
    # Printable only: a NUL cannot even be compared on PostgreSQL (it would be a 500).
    if not 0 < len(delivery_id) <= MAX_DELIVERY_ID or not delivery_id.isprintable():
        raise BadRequest(
            "delivery id is missing, too long or unprintable", detail=ErrorDetail(field="id")
        )
    result = await request.app[WEBHOOKS].db.run(requeue, delivery_id)
    if result is Replay.UNKNOWN:
        raise NotFound(f"no delivery {delivery_id!r}", detail=ErrorDetail(delivery=delivery_id))
    if result is Replay.NOT_REPLAYABLE:
        raise Conflict(
            "rejected deliveries and deliveries being processed cannot be replayed",
            detail=ErrorDetail(delivery=delivery_id),
        )
    return web.json_response({"delivery": delivery_id, "status": "received"})


_ERROR = {"$ref": "#/components/schemas/Error"}
_BEARER: list[dict[str, list[str]]] = [{"operatorToken": []}]


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR}}}


_DELIVERY = {
    "type": "object",
    "required": ["delivery", "event", "status", "attempts", "handlers", "received_at"],
    "properties": {
        "delivery": {"type": "string"},
        "event": {"type": "string"},
        "action": {"type": ["string", "null"]},
        "repo": {"type": ["string", "null"]},
        "status": {"type": "string", "enum": [s.value for s in DeliveryStatus]},
        "reason": {"type": ["string", "null"]},
        "attempts": {"type": "integer"},
        "handlers": {"type": "object", "additionalProperties": {"type": "string"}},
        "received_at": {"type": "string"},
        "processed_at": {"type": ["string", "null"]},
        "next_attempt_at": {"type": ["string", "null"]},
    },
}
OPENAPI_PATHS: dict[str, Any] = {
    LIST_PATH: {
        "get": {
            "summary": "Webhook deliveries newest first; status=dead lists the dead letters, "
            "status=failed also those still being retried",
            "security": _BEARER,
            "parameters": [
                {
                    "name": "status",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": STATUS_FILTERS},
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIST},
                },
            ],
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["deliveries"],
                                "properties": {"deliveries": {"type": "array", "items": _DELIVERY}},
                            }
                        }
                    },
                },
                "400": _error("Bad status or limit"),
                "401": _error("Missing or wrong bearer token"),
                "429": _error("Too many failed authentications; see Retry-After"),
            },
        }
    },
    REPLAY_PATH: {
        "post": {
            "summary": "Process a delivery again at the next sweep (a dead one runs only the "
            "handlers that failed)",
            "security": _BEARER,
            "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "responses": {
                "200": {"description": "Queued for processing"},
                "400": _error("Bad delivery id"),
                "401": _error("Missing or wrong bearer token"),
                "429": _error("Too many failed authentications; see Retry-After"),
                "404": _error("No such delivery"),
                "409": _error("Rejected, replayed, or being processed"),
            },
        }
    },
}
