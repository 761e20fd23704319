"""GitHub webhooks: the signed endpoint, the durable delivery log, and the event router.

`setup(app)` adds its routes to the web service and `OPENAPI_PATHS` is its part of the API
description (see `steelframe.server.default_plugins`); the composition root
(`steelframe.composition`) builds what the routes use.
"""

from __future__ import annotations

from aiohttp import web

from webhooks.operator_routes import OPENAPI_PATHS as OPERATOR_PATHS


def setup(app: web.Application) -> None:
    """Add the webhook routes; their dependencies (`webhooks.deps.Webhooks`) and the
    endpoint's early serving come from the composition root (`steelframe.composition`)."""
    from webhooks import operator_routes, routes

    app.add_routes(routes.routes)
    app.add_routes(operator_routes.routes)


# The document's shared error shape (the composition root supplies the components).
_ERROR = {"$ref": "#/components/schemas/Error"}


def _answer(description: str) -> dict[str, object]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR}}}


def _ack(description: str, *statuses: str) -> dict[str, object]:
    status = {"const": statuses[0]} if len(statuses) == 1 else {"enum": list(statuses)}
    schema = {
        "type": "object",
        "required": ["delivery", "status"],
        "additionalProperties": False,
        "properties": {"delivery": {"type": "string"}, "status": status},
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
        "202": _ack(
            "Stored; will be processed (`accepted`), or an earlier delivery's content under a "
            "new delivery id, stored and never processed (`replayed`)",
            "accepted",
            "replayed",
        ),
        "200": _ack("A redelivery of a stored delivery; not processed again", "duplicate"),
        "400": _answer("Malformed payload or headers; stored as rejected with the reason"),
        "401": _answer("Missing or wrong signature; nothing stored"),
        "408": _answer("The body stopped arriving for 30 s; nothing stored"),
        "413": _answer("Body over 25 MB"),
        "503": _answer(
            "Not configured, the delivery could not be stored, or too many bodies are being "
            "read at once (Retry-After says when to come back)"
        ),
    },
}
# routes.PATH, spelled out: importing webhooks.routes here would load the receiver stack
# for every importer of this package. The delivery log's operator paths come with it.
OPENAPI_PATHS = {"/api/github/webhooks": {"post": OPENAPI_OPERATION}, **OPERATOR_PATHS}
