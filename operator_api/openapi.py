"""The OpenAPI 3.1 description served at /api/openapi.json (tests check it matches routes)."""

from __future__ import annotations

from functools import cache
from typing import Any

from bot import __version__

ERROR = {"$ref": "#/components/schemas/Error"}
BEARER: list[dict[str, list[str]]] = [{"operatorToken": []}]


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "Bad input; `detail.field` names the field",
        401: "Missing or wrong bearer token",
        404: "Not found (or another operator's)",
        409: "Conflict",
        503: "Not configured",
        413: "Body too large",
        502: "The model failed",
        504: "The model timed out",
    }
    return {str(code): _json(ERROR, text[code]) for code in codes}


def _op(
    summary: str,
    responses: dict[str, Any],
    *,
    body: dict[str, Any] | None = None,
    params: list[dict[str, Any]] | None = None,
    auth: bool = True,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    if auth:
        op["security"] = BEARER
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    if params:
        op["parameters"] = params
    return op


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


SESSION_PATH = {"name": "session", "in": "path", "required": True, "schema": {"type": "string"}}
SSE = {
    "description": "text/event-stream of Frame objects",
    "content": {"text/event-stream": {"schema": {"$ref": "#/components/schemas/Frame"}}},
}


@cache
def openapi_document() -> dict[str, Any]:
    ref = lambda name: {"$ref": f"#/components/schemas/{name}"}  # noqa: E731
    paths: dict[str, Any] = {
        "/healthz": {
            "get": _op(
                "Health: version, database and Redis reachability",
                {"200": _json(ref("Health"))},
                auth=False,
            )
        },
        "/readyz": {
            "get": _op(
                "Readiness: 200 when the database, Redis (if configured) and the memory index "
                "serve; 503 naming what is down",
                {"200": _json(ref("Readiness")), "503": _json(ref("Readiness"))},
                auth=False,
            )
        },
        "/metrics": {
            "get": _op(
                "Prometheus metrics of this process (bearer STEELFRAME_METRICS_TOKEN, or "
                "loopback clients when it is unset)",
                {
                    "200": {
                        "description": "Prometheus text exposition",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    "403": _json(ref("Error")),
                },
                auth=False,
            )
        },
        "/api/openapi.json": {
            "get": _op("This document", {"200": _json({"type": "object"})}, auth=False)
        },
        "/api/operator/chat": {
            "post": _op(
                "Blocking chat turn",
                {"200": _json(ref("ChatResponse")), **_errors(400, 401, 404, 409, 413, 502, 504)},
                body=ref("ChatRequest"),
            ),
            "get": _op(
                "History of a session (default: the active one)",
                {"200": _json(ref("History")), **_errors(400, 401, 404)},
                params=[
                    _query(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": 500},
                        "last N messages",
                    ),
                    _query("session", {"type": "string"}, "session id"),
                ],
            ),
        },
        "/api/operator/chat/stream": {
            "post": _op(
                "Streaming chat turn (SSE)",
                {"200": SSE, **_errors(400, 401, 404, 409, 413)},
                body=ref("ChatRequest"),
            ),
            "get": _op(
                "Re-attach to the in-flight turn; replays frames after Last-Event-ID",
                {"200": SSE, **_errors(400, 401, 404)},
                params=[
                    _query("session", {"type": "string"}, "session id"),
                    _query("turn", {"type": "string"}, "turn id"),
                    _query(
                        "last_event_id", {"type": "integer"}, "instead of the Last-Event-ID header"
                    ),
                ],
            ),
        },
        "/api/operator/chat/stop": {
            "post": _op(
                "Stop this operator's in-flight turn",
                {"200": _json(ref("StopResult")), **_errors(401)},
            )
        },
        "/api/operator/chat/clear": {
            "post": _op(
                "Clear a session's messages",
                {"200": _json({"type": "object"}), **_errors(400, 401, 404, 413)},
            )
        },
        "/api/operator/chat/sessions": {
            "get": _op(
                "Sessions, newest activity first",
                {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {"sessions": {"type": "array", "items": ref("Session")}},
                        }
                    ),
                    **_errors(401),
                },
            )
        },
        "/api/operator/chat/new": {
            "post": _op(
                "Close the open session and start a new one (Discuss with issue)",
                {"201": _json(ref("Session")), **_errors(400, 401, 413)},
            )
        },
        "/api/operator/chat/decision": {
            "post": _op(
                "Publish a Decision comment (marker once; removes steelframe:needs_human)",
                {"200": _json(ref("Published")), **_errors(400, 401, 404, 413, 502)},
                body=ref("DecisionRequest"),
            )
        },
        "/api/operator/chat/file": {
            "post": _op(
                "File the session's pending proposal (or an explicit title/body) as an issue",
                {
                    "201": _json(ref("Filed")),
                    "200": _json(ref("Filed")),
                    **_errors(400, 401, 404, 413, 502),
                },
            )
        },
        "/api/operator/chat/session/{session}": {
            "get": _op(
                "A session's messages and summary; pins the next message to it",
                {"200": _json(ref("Session")), **_errors(400, 401, 404)},
                params=[SESSION_PATH],
            ),
            "delete": _op(
                "Delete a session and its turns",
                {"200": _json({"type": "object"}), **_errors(400, 401, 404)},
                params=[SESSION_PATH],
            ),
        },
    }
    paths.update(_task_paths(ref))
    schemas: dict[str, Any] = {
        "Error": {
            "type": "object",
            "required": ["error", "code"],
            "properties": {"error": {"type": "string"}, "code": {"type": "string"}, "detail": {}},
        },
        "Health": {
            "type": "object",
            "properties": {
                "status": {"type": "string"},
                "version": {"type": "string"},
                "database": {"type": "boolean"},
                "redis": {"type": ["boolean", "null"]},
            },
        },
        "Readiness": {
            "type": "object",
            "required": ["status", "checks"],
            "properties": {
                "status": {"enum": ["ready", "not_ready"]},
                "checks": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "required": ["ok", "detail"],
                        "properties": {"ok": {"type": "boolean"}, "detail": {"type": "string"}},
                    },
                },
            },
        },
        "ChatRequest": {
            "type": "object",
            "required": ["message"],
            "additionalProperties": False,
            "properties": {
                "message": {"type": "string", "minLength": 1},
                "session": {"type": ["string", "null"]},
                "agent": {"type": ["string", "null"]},
                "focus": {
                    "type": ["integer", "null"],
                    "minimum": 1,
                    "description": "null clears the focus",
                },
            },
        },
        "Frame": {
            "type": "object",
            "required": ["id", "type"],
            "properties": {
                "id": {"type": "integer"},
                "type": {"enum": ["status", "thinking", "delta", "done", "error"]},
                "text": {"type": "string"},
                "draft": {"type": "integer", "description": "1, or 2 for the grounded re-draft"},
                "replace": {
                    "type": "boolean",
                    "description": "discard the reply text shown so far",
                },
                "response": ref("ChatResponse"),
                "error": {"type": "string"},
                "reason": {"type": "string"},
            },
        },
        "ChatResponse": {
            "type": "object",
            "properties": {
                "reply": {"type": "string"},
                "intent": {"type": "string"},
                "session": {"type": "string"},
                "turn_id": {"type": "string"},
                "agent": {"type": "string"},
                "focus": {"type": ["integer", "null"]},
                "history": {"type": "array", "items": ref("Message")},
                "retrieve_hits": {"type": "integer"},
                "retrieved": {"type": "array", "items": {"type": "object"}},
                "retrieval_available": {"type": "boolean"},
                "reasoning": {"type": "string"},
                "model": {"type": "string"},
                "usage": {"type": "object"},
                "decision_body": {"type": ["string", "null"]},
                "decision_issue": {"type": ["integer", "null"]},
                "pending_title": {"type": ["string", "null"]},
                "pending_body": {"type": ["string", "null"]},
                "filed_issue_number": {"type": ["integer", "null"]},
                "filed_issue_url": {"type": ["string", "null"]},
                "filed_task_started": {"type": "boolean"},
                "notes": {"type": "array", "items": {"type": "string"}},
            },
        },
        "Message": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "seq": {"type": "integer"},
                "role": {"enum": ["user", "assistant"]},
                "content": {"type": "string"},
                "reasoning": {"type": ["string", "null"]},
                "intent": {"type": ["string", "null"]},
                "meta": {"type": "object"},
                "created_at": {"type": "string"},
            },
        },
        "History": {
            "type": "object",
            "properties": {
                "session": {"type": ["string", "null"]},
                "messages": {"type": "array", "items": ref("Message")},
            },
        },
        "Session": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "title": {"type": ["string", "null"]},
                "kind": {"enum": ["chat", "discuss"]},
                "agent": {"type": "string"},
                "focus": {"type": ["integer", "null"]},
                "summary": {"type": ["string", "null"]},
                "summary_status": {"type": "string"},
                "decision": {"type": ["object", "null"]},
                "messages": {"type": "array", "items": ref("Message")},
            },
        },
        "DecisionRequest": {
            "type": "object",
            "required": ["issue", "body"],
            "additionalProperties": False,
            "properties": {
                "issue": {"type": "integer", "minimum": 1},
                "body": {"type": "string", "minLength": 1},
                "session_id": {"type": "string"},
            },
        },
        "Published": {
            "type": "object",
            "properties": {
                "published": {"type": "boolean"},
                "issue": {"type": "integer"},
                "comment_id": {"type": "integer"},
                "comment_url": {"type": "string"},
            },
        },
        "Filed": {
            "type": "object",
            "properties": {
                "filed_issue_number": {"type": "integer"},
                "filed_issue_url": {"type": "string"},
                "filed_task_started": {"type": "boolean"},
            },
        },
        "StopResult": {
            "type": "object",
            "properties": {
                "stopped": {"type": "boolean"},
                "session": {"type": "string"},
                "turn_id": {"type": "string"},
            },
        },
    }
    schemas.update(_task_schemas(ref))
    return {
        "openapi": "3.1.0",
        "info": {"title": "Steelframe operator API", "version": __version__},
        "components": {
            "securitySchemes": {"operatorToken": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas,
        },
        "paths": paths,
    }


def register_paths(extra: dict[str, Any], schemas: dict[str, Any] | None = None) -> None:
    """Packages that add routes add their paths here (at app set-up, before serving)."""
    document = openapi_document()
    document["paths"].update(extra)
    if schemas:
        document["components"]["schemas"].update(schemas)


# -- Task lifecycle (docs/api.md, "Task lifecycle") ------------------------------------------

TASK_PATH = {
    "name": "id",
    "in": "path",
    "required": True,
    "schema": {"type": "integer", "minimum": 1},
}


def _task_paths(ref: Any) -> dict[str, Any]:
    states = ["queued", "running", "waiting_for_info", "delivered", "failed", "terminated"]
    return {
        "/api/operator/board": {
            "get": _op(
                "Tasks newest first (archived ones only with archived=true)",
                {"200": _json(ref("Board")), **_errors(400, 401)},
                params=[
                    _query("state", {"enum": states}, "only tasks in this state"),
                    _query("archived", {"type": "boolean"}, "include archived tasks"),
                    _query(
                        "limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "at most N"
                    ),
                ],
            )
        },
        "/api/operator/tasks/{id}": {
            "get": _op(
                "A task with its event log",
                {"200": _json(ref("TaskDetail")), **_errors(400, 401, 404)},
                params=[TASK_PATH],
            )
        },
        "/api/operator/tasks/{id}/terminate": {
            "post": _op(
                "Stop a queued, running or waiting task (job cancelled, runtime killed); 202: a"
                " frozen worker holds the task, the request is recorded and applied later",
                {
                    "200": _json(ref("TaskDetail")),
                    "202": _json(ref("TaskDetail")),
                    **_errors(400, 401, 404, 409, 413, 503),
                },
                params=[TASK_PATH],
            )
        },
        "/api/operator/tasks/{id}/archive": {
            "post": _op(
                "Hide a finished task from the board",
                {"200": _json(ref("TaskDetail")), **_errors(400, 401, 404, 409, 413, 503)},
                params=[TASK_PATH],
            )
        },
    }


def _task_schemas(ref: Any) -> dict[str, Any]:
    nullable_str = {"type": ["string", "null"]}
    task = {
        "type": "object",
        "required": ["id", "repo", "issue", "title", "state", "archived", "updated_at"],
        "properties": {
            "id": {"type": "integer"},
            "repo": {"type": "string"},
            "issue": {"type": "integer"},
            "title": {"type": "string"},
            "state": {"type": "string"},
            "archived": {"type": "boolean"},
            "pr_url": nullable_str,
            "last_event": {
                "type": ["object", "null"],
                "properties": {
                    "kind": {"type": "string"},
                    "at": {"type": "string"},
                    "detail": {"type": "string"},
                },
            },
            "updated_at": {"type": "string"},
        },
    }
    return {
        "BoardTask": task,
        "Board": {
            "type": "object",
            "properties": {"tasks": {"type": "array", "items": ref("BoardTask")}},
        },
        "TaskEvent": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "kind": {"type": "string"},
                "from": nullable_str,
                "to": nullable_str,
                "actor": {"type": "string"},
                "at": {"type": "string"},
                "detail": {"type": "string"},
                "data": {"type": "object"},
            },
        },
        "TaskDetail": {
            "allOf": [
                ref("BoardTask"),
                {
                    "type": "object",
                    "properties": {
                        "origin_session": nullable_str,
                        "generation": {"type": "integer"},
                        "attempts": {"type": "integer"},
                        "branch": nullable_str,
                        "pr_number": {"type": ["integer", "null"]},
                        "question": nullable_str,
                        "last_error": nullable_str,
                        "summary": nullable_str,
                        "runtime_session": nullable_str,
                        "usage": {"type": "object"},
                        "created_at": {"type": "string"},
                        "lease": {"type": ["object", "null"]},
                        "events": {"type": "array", "items": ref("TaskEvent")},
                    },
                },
            ]
        },
    }
