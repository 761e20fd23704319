"""The operator API's JSON shapes (OpenAPI 3.1 components, i.e. JSON Schema 2020-12).

Response objects list every key they carry as `required` and allow no other keys, so a
generated client gets exact types and the test suite's response check (tests/conftest.py)
fails on a key the service sends but this document does not name.

The shapes are tables, one entry per key: rows such as `"name": {"type": "string"}` repeat
in many objects (a `duplicates` row) because many objects carry such keys, not copied logic;
keys two objects share in meaning are declared once (`session_fields`). The task JSON and
the events stream's frames are generated from their Structs (bot.contracts).
"""

from __future__ import annotations

from typing import Any

import msgspec

from bot.contracts.events import EventFrame
from bot.contracts.tasks import Board, TaskDetail, TaskLog

REF_TEMPLATE = "#/components/schemas/{name}"
NULLABLE_STR = {"type": ["string", "null"]}
NULLABLE_INT = {"type": ["integer", "null"]}


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF_TEMPLATE.format(name=name)}


def exact(properties: dict[str, Any], *, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object with exactly these keys; all required but the `optional` ones."""
    return {
        "type": "object",
        "required": [name for name in properties if name not in optional],
        "additionalProperties": False,
        "properties": properties,
    }


def request_object(properties: dict[str, Any], *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A request body: these keys at most, the `required` ones among them."""
    schema: dict[str, Any] = {"type": "object"}
    if required:
        schema["required"] = list(required)
    return {**schema, "additionalProperties": False, "properties": properties}


def _chat_schemas() -> dict[str, Any]:
    message = exact(
        {
            "id": {"type": "string"},
            "seq": {"type": "integer"},
            "role": {"enum": ["user", "assistant"]},
            "content": {"type": "string"},
            "reasoning": NULLABLE_STR,
            "intent": NULLABLE_STR,
            "meta": {"type": ["object", "null"]},
            "created_at": {"type": "string"},
        }
    )
    session_fields: dict[str, Any] = {
        "id": {"type": "string"},
        "title": NULLABLE_STR,
        "kind": {"enum": ["chat", "discuss"]},
        "agent": {"type": "string"},
        "focus": NULLABLE_INT,
        "created_at": {"type": "string"},
        "last_activity_at": {"type": "string"},
        "closed_at": NULLABLE_STR,
        "summary": NULLABLE_STR,
        "summary_status": {"type": "string"},
        "decision": {
            "oneOf": [
                {"type": "null"},
                exact({"body": {"type": "string"}, "issue": {"type": "integer"}}),
            ]
        },
        "pending": {
            "description": "the filing proposal waiting for the operator's yes",
            "oneOf": [
                {"type": "null"},
                exact({"title": {"type": "string"}, "body": NULLABLE_STR, "kind": NULLABLE_STR}),
            ],
        },
        "turns": NULLABLE_INT,
        "active": {"type": "boolean"},
    }
    return {
        "ChatRequest": request_object(
            {
                "message": {"type": "string", "minLength": 1},
                "session": {"type": ["string", "null"]},
                "agent": {"type": ["string", "null"]},
                "focus": {
                    "type": ["integer", "null"],
                    "minimum": 1,
                    "description": "null clears the focus",
                },
            },
            required=("message",),
        ),
        "Frame": {
            "type": "object",
            "required": ["id", "type"],
            "additionalProperties": False,
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
                "session": {"type": "string", "description": "status `turn started`"},
                "turn_id": {"type": "string", "description": "status `turn started`"},
                "message": {
                    "type": "string",
                    "description": "status `turn started`: the operator's message, for a"
                    " client re-attaching after a reload",
                },
                "round": {"type": "integer", "description": "status: retrieval round"},
                "rounds": {"type": "integer", "description": "status: retrieval rounds"},
                "query": {"type": "string", "description": "status: which retrieval query"},
                "hits": {"type": "integer", "description": "status: hits the round found"},
                "context": {
                    "type": "integer",
                    "description": "status: focus or link context the round added (not hits)",
                },
            },
        },
        "ChatResponse": exact(
            {
                "reply": {"type": "string"},
                "intent": {"type": "string"},
                "session": {"type": "string"},
                "turn_id": {"type": "string"},
                "agent": {"type": "string"},
                "focus": NULLABLE_INT,
                "history": {"type": "array", "items": ref("Message")},
                "retrieve_hits": {"type": "integer"},
                "retrieved": {"type": "array", "items": {"type": "object"}},
                "retrieval_available": {"type": "boolean"},
                "memory_verdict": {
                    "type": "string",
                    "enum": ["answers", "nothing", "unavailable"],
                    "description": "does session memory answer the question (docs/memory.md)",
                },
                "reasoning": {"type": "string"},
                "model": {"type": "string"},
                "usage": {"type": "object"},
                "decision_body": NULLABLE_STR,
                "decision_issue": NULLABLE_INT,
                "pending_title": NULLABLE_STR,
                "pending_body": NULLABLE_STR,
                "pending_kind": {
                    "type": ["string", "null"],
                    "description": "what filing the pending proposal makes (e.g. work)",
                },
                "filed_issue_number": NULLABLE_INT,
                "filed_issue_url": NULLABLE_STR,
                "filed_task_started": {"type": "boolean"},
                "notes": {"type": "array", "items": {"type": "string"}},
            }
        ),
        "Message": message,
        "History": exact(
            {"session": NULLABLE_STR, "messages": {"type": "array", "items": ref("Message")}}
        ),
        "SessionSummary": exact(session_fields),
        "Session": exact(
            {
                **session_fields,
                "messages": {"type": "array", "items": ref("Message")},
                "turn_in_flight": {
                    **NULLABLE_STR,
                    "description": "the id of the turn still running in this session, to"
                    " re-attach to (GET /api/operator/chat/stream?turn=); null when none",
                },
            }
        ),
        "NewSession": exact(
            {
                **session_fields,
                "previous_session": {
                    "type": ["string", "null"],
                    "description": "the session this one closed (its summary is being made)",
                },
            }
        ),
        "Sessions": exact({"sessions": {"type": "array", "items": ref("SessionSummary")}}),
        "Cleared": exact({"session": NULLABLE_STR, "cleared": {"type": "integer"}}),
        "Deleted": exact({"deleted": {"type": "string"}}),
        "StopResult": exact(
            {
                "stopped": {"type": "boolean"},
                "session": NULLABLE_STR,
                "turn_id": {"type": "string"},
                "reason": {
                    "type": "string",
                    "description": "why a turn in flight was not stopped (e.g. finishing: "
                    "its model had already answered, so it completes and is kept)",
                },
            },
            optional=("session", "turn_id", "reason"),
        ),
    }


def _action_schemas() -> dict[str, Any]:
    return {
        "DecisionRequest": request_object(
            {
                "issue": {"type": "integer", "minimum": 1},
                "body": {"type": "string", "minLength": 1},
                "session_id": {"type": "string"},
                "request_id": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 200,
                    "description": "idempotency key (or the Idempotency-Key header)",
                },
            },
            required=("issue", "body"),
        ),
        "Published": exact(
            {
                "published": {"type": "boolean"},
                "issue": {"type": "integer"},
                "comment_id": {"type": "integer"},
                "comment_url": {"type": "string"},
            }
        ),
        "FileRequest": request_object(
            {
                "session": {"type": ["string", "null"]},
                "title": {"type": ["string", "null"], "maxLength": 300},
                "body": {"type": ["string", "null"]},
            }
        ),
        "ClearRequest": request_object({"session": {"type": ["string", "null"]}}),
        "NewSessionRequest": request_object(
            {
                "title": {"type": ["string", "null"], "maxLength": 200},
                "issue": {"type": ["integer", "null"], "minimum": 1},
                "agent": {"type": ["string", "null"]},
            }
        ),
        "Filed": exact(
            {
                "filed_issue_number": {"type": "integer"},
                "filed_issue_url": {"type": "string"},
                "filed_task_started": {"type": "boolean"},
            }
        ),
    }


def _task_schemas() -> dict[str, Any]:
    """The task JSON's components, generated from its Structs (bot.contracts.tasks)."""
    _, components = msgspec.json.schema_components(
        [Board, TaskDetail, TaskLog], ref_template=REF_TEMPLATE
    )
    return components


def _event_schemas() -> dict[str, Any]:
    """The events stream's frames (bot.contracts.events): `Event` is their union."""
    (event,), components = msgspec.json.schema_components([EventFrame], ref_template=REF_TEMPLATE)
    return {"Event": event, **components}


def component_schemas() -> dict[str, Any]:
    """A fresh copy each call: every app's document owns its schemas."""
    return {
        "Error": exact(
            {"error": {"type": "string"}, "code": {"type": "string"}, "detail": {}},
            optional=("detail",),
        ),
        "Health": exact(
            {
                "status": {"enum": ["ok", "degraded"]},
                "version": {"type": "string"},
                "database": {"type": "boolean"},
                "redis": {"type": ["boolean", "null"]},
                "coding_sandbox": ref("CodingSandbox"),
            }
        ),
        "Readiness": exact(
            {
                "status": {"enum": ["ready", "not_ready"]},
                "checks": {
                    "type": "object",
                    "additionalProperties": exact(
                        {"ok": {"type": "boolean"}, "detail": {"type": "string"}}
                    ),
                },
            }
        ),
        **_chat_schemas(),
        **_action_schemas(),
        **_task_schemas(),
        **_event_schemas(),
    }
