"""The OpenAPI 3.1 description served at /api/openapi.json, built once per app.

Each endpoint is declared once, where its handler is: `Endpoints.get/post/delete` register
the aiohttp route and record its OpenAPI operation together, so the routes and the document
cannot drift. The composition root (steelframe.server) builds one document per app from
every package's paths with `build_document` and keeps it under `OPENAPI_DOCUMENT`; nothing
is cached or shared between apps.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiohttp import web

from bot import __version__
from bot.contracts.chat import MAX_REQUEST_KEY_CHARS
from operator_api.schemas import component_schemas, ref

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Paths = Mapping[str, Mapping[str, Any]]

OPENAPI_DOCUMENT = web.AppKey("openapi_document", dict[str, Any])
ERROR = ref("Error")
# A bearer token, or the web GUI's session cookie (whose writes also need the CSRF header).
BEARER: list[dict[str, list[str]]] = [{"operatorToken": []}, {"operatorSession": []}]
CSRF_REFUSED = "Signed in with the session cookie but without the matching X-CSRF-Token"
ERROR_TEXT = {
    400: "Bad input; `detail.field` names the field",
    401: "Missing or wrong bearer token",
    403: "Not allowed from here (or without the right token)",
    404: "Not found (or another operator's)",
    409: "Conflict",
    413: "Body too large",
    422: "The Idempotency-Key (or request_id) was used for another request; nothing was done",
    429: "Too many failed authentications from this address or with this token prefix;"
    " `Retry-After` says when to try again (a token verified before is never held back)",
    500: "Unexpected failure (logged with the request id)",
    502: "The model (or GitHub) failed",
    503: "Not configured, or a dependency (database, Redis, a row a frozen worker holds) is"
    " unavailable; `Retry-After` when retrying helps",
    504: "The model timed out",
}
SSE = {
    "description": "text/event-stream of Frame objects",
    "content": {"text/event-stream": {"schema": ref("Frame")}},
}


def json_body(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def text_body(media_type: str, description: str) -> dict[str, Any]:
    """A response whose body is text of `media_type` (a page, a metrics exposition)."""
    return {"description": description, "content": {media_type: {"schema": {"type": "string"}}}}


def errors(*codes: int) -> dict[str, Any]:
    return {str(code): json_body(ERROR, ERROR_TEXT[code]) for code in codes}


def query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def idempotency_key(description: str) -> dict[str, Any]:
    """The `Idempotency-Key` header's parameter (a turn's, a publish's)."""
    return {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_REQUEST_KEY_CHARS},
        "description": description,
    }


def path_param(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": schema}


def operation(
    summary: str,
    responses: dict[str, Any],
    *,
    body: dict[str, Any] | None = None,
    body_required: bool = True,
    params: list[dict[str, Any]] | None = None,
    auth: bool = True,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    if auth:
        op["security"] = BEARER
    if body is not None:
        op["requestBody"] = {
            "required": body_required,
            "content": {"application/json": {"schema": body}},
        }
    if params:
        op["parameters"] = params
    return op


class Endpoints:
    """An aiohttp route table whose every route carries its OpenAPI operation."""

    def __init__(self) -> None:
        self.routes = web.RouteTableDef()
        self.paths: dict[str, dict[str, Any]] = {}

    def route(
        self, method: str, path: str, summary: str, responses: dict[str, Any], **options: Any
    ) -> Callable[[Handler], Handler]:
        described = operation(summary, responses, **options)
        if method != "GET" and options.get("auth", True):
            described["responses"].setdefault("403", json_body(ERROR, CSRF_REFUSED))
        if options.get("auth", True):
            described["responses"].setdefault("429", json_body(ERROR, ERROR_TEXT[429]))

        def register(handler: Handler) -> Handler:
            if method.lower() in self.paths.get(path, {}):
                raise ValueError(f"{method} {path} is declared twice")
            self.routes.route(method, path)(handler)
            self.paths.setdefault(path, {})[method.lower()] = described
            return handler

        return register

    def get(
        self, path: str, summary: str, responses: dict[str, Any], **options: Any
    ) -> Callable[[Handler], Handler]:
        return self.route("GET", path, summary, responses, **options)

    def post(
        self, path: str, summary: str, responses: dict[str, Any], **options: Any
    ) -> Callable[[Handler], Handler]:
        return self.route("POST", path, summary, responses, **options)

    def delete(
        self, path: str, summary: str, responses: dict[str, Any], **options: Any
    ) -> Callable[[Handler], Handler]:
        return self.route("DELETE", path, summary, responses, **options)


def build_document(path_sets: Iterable[Paths]) -> dict[str, Any]:
    """A new document from these paths (each package's), with the shared components."""
    paths: dict[str, dict[str, Any]] = {}
    for path_set in path_sets:
        for path, methods in path_set.items():
            merged = paths.setdefault(path, {})
            for method, op in methods.items():
                if method in merged:
                    raise ValueError(f"{method.upper()} {path} is described twice")
                merged[method] = copy.deepcopy(op)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Steelframe operator API", "version": __version__},
        "components": {
            "securitySchemes": {
                "operatorToken": {"type": "http", "scheme": "bearer"},
                "operatorSession": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "steelframe_session",
                    "description": "the web GUI's session (POST /gui/session); writes also "
                    "send X-CSRF-Token",
                },
            },
            "schemas": component_schemas(),
        },
        "paths": dict(sorted(paths.items())),
    }
