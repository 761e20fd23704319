"""`POST /api/github/webhooks` (Probot's path): the thin HTTP side of `webhooks.receiver`."""

from __future__ import annotations

from aiohttp import web

from webhooks.appkeys import RECEIVER
from webhooks.receiver import Receipt

routes = web.RouteTableDef()
PATH = "/api/github/webhooks"
# The OpenAPI description of this endpoint; the composition root adds it to the app's
# document (the shared `Error` schema comes from there).
_ERROR = {"$ref": "#/components/schemas/Error"}


def _error(description: str) -> dict[str, object]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR}}}


def _ack(description: str, status: str) -> dict[str, object]:
    schema = {
        "type": "object",
        "required": ["delivery", "status"],
        "additionalProperties": False,
        "properties": {"delivery": {"type": "string"}, "status": {"const": status}},
    }
    return {"description": description, "content": {"application/json": {"schema": schema}}}


OPENAPI_OPERATION = {
    "summary": "GitHub webhook deliveries (signed with WEBHOOK_SECRET)",
    "description": "Stored durably before the answer; processed after it. Authenticated by "
    "X-Hub-Signature-256, not by an operator token.",
    "parameters": [
        {"name": name, "in": "header", "required": True, "schema": {"type": "string"}}
        for name in ("X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256")
    ],
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
    "responses": {
        "202": _ack("Stored; will be processed", "accepted"),
        "200": _ack("A redelivery of a stored delivery; not processed again", "duplicate"),
        "400": _error("Malformed payload or headers; stored as rejected with the reason"),
        "401": _error("Missing or wrong signature; nothing stored"),
        "413": _error("Body over 25 MB"),
        "503": _error("Not configured, or the delivery could not be stored"),
    },
}
OPENAPI_PATHS = {PATH: {"post": OPENAPI_OPERATION}}


@routes.post(PATH)
async def receive_webhook(request: web.Request) -> web.Response:
    receiver = request.app[RECEIVER]
    # Refuse an oversized body before reading it (GitHub never sends more than 25 MB).
    receiver.check_size(request.content_length)
    body = await request.read()
    receipt, delivery_id = await receiver.receive(request.headers, body)
    if receipt is Receipt.DUPLICATE:
        return web.json_response({"delivery": delivery_id, "status": "duplicate"}, status=200)
    return web.json_response({"delivery": delivery_id, "status": "accepted"}, status=202)
