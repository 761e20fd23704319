"""The OpenAPI description of the delivery log's operator endpoints (`webhooks.operator_routes`),
kept free of the database layer so describing the service never loads it."""

from __future__ import annotations

from typing import Any

LIST_PATH = "/api/operator/deliveries"
REPLAY_PATH = "/api/operator/deliveries/{id}/replay"
MAX_LIST = 500
# DeliveryStatus's values (a test keeps them equal), and `failed`: dead and retrying.
STATUSES = ("received", "processing", "processed", "ignored", "retrying", "dead", "rejected")
STATUS_FILTERS = (*STATUSES, "failed")

_ERROR = {"$ref": "#/components/schemas/Error"}
_BEARER: list[dict[str, list[str]]] = [{"operatorToken": []}]
_STRING_OR_NULL = {"type": ["string", "null"]}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _exact(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(properties),
        "properties": properties,
        "additionalProperties": False,
    }


DELIVERY = _exact(
    {
        "delivery": {"type": "string"},
        "event": {"type": "string"},
        "action": _STRING_OR_NULL,
        "repo": _STRING_OR_NULL,
        "status": {"enum": list(STATUSES)},
        "reason": _STRING_OR_NULL,
        "attempts": {"type": "integer", "minimum": 0},
        "handlers": {"type": "object", "additionalProperties": {"type": "string"}},
        "received_at": {"type": "string"},
        "processed_at": _STRING_OR_NULL,
        "next_attempt_at": _STRING_OR_NULL,
    }
)

DELIVERY_LOG_PATHS: dict[str, Any] = {
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
                    "schema": {"enum": list(STATUS_FILTERS)},
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIST},
                },
            ],
            "responses": {
                "200": _json(_exact({"deliveries": {"type": "array", "items": DELIVERY}}), "OK"),
                "400": _json(_ERROR, "Bad status or limit; `detail.field` names it"),
                "401": _json(_ERROR, "Missing or wrong bearer token"),
            },
        }
    },
    REPLAY_PATH: {
        "post": {
            "summary": "Process a delivery again at the next sweep (a dead one runs only the "
            "handlers that failed)",
            "security": _BEARER,
            "parameters": [
                {
                    "name": "id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "minLength": 1, "maxLength": 100},
                }
            ],
            "responses": {
                "200": _json(
                    _exact({"delivery": {"type": "string"}, "status": {"const": "received"}}),
                    "Queued for processing",
                ),
                "400": _json(_ERROR, "Bad delivery id; `detail.field` is `id`"),
                "401": _json(_ERROR, "Missing or wrong bearer token"),
                "404": _json(_ERROR, "No such delivery"),
                "409": _json(_ERROR, "Rejected, or being processed"),
            },
        }
    },
}
