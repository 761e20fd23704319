"""The operator API's JSON shapes (OpenAPI 3.1 components, i.e. JSON Schema 2020-12).

Response objects list every key they carry as `required` and allow no other keys, so a
generated client gets exact types and the test suite's response check (tests/conftest.py)
fails on a key the service sends but this document does not name.

The shapes are tables, one entry per key: rows such as `"name": {"type": "string"}` repeat
in many objects (a `duplicates` row) because many objects carry such keys, not copied logic;
keys two objects share in meaning are declared once (`session_fields`, `task_fields`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from bot.contracts import chat

NULLABLE_STR = {"type": ["string", "null"]}
NULLABLE_INT = {"type": ["integer", "null"]}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


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


def _any_json(kind: type) -> dict[str, Any]:
    """msgspec's schema hook: a value we pass through unread (bot.contracts.chat.JsonObject)."""
    if kind is object:
        return {"description": "any JSON value"}
    raise NotImplementedError


def _chat_schemas() -> dict[str, Any]:
    """Chat's components, generated from its Structs (bot.contracts.chat): the frames of a
    turn's stream (`Frame`, a union on `type`), the ChatResponse, messages and sessions."""
    (frame, *_), components = msgspec.json.schema_components(
        (chat.Frame, *chat.RESPONSE_TYPES),
        ref_template="#/components/schemas/{name}",
        schema_hook=_any_json,
    )
    for kind in chat.FRAME_TYPES:
        # The stream numbers each frame (`id`, SSE's event id) and a frame has no other keys.
        schema = components[kind.__name__]
        schema["properties"] = {"id": {"type": "integer"}, **schema["properties"]}
        schema["required"] = ["id", *schema["required"]]
        schema["additionalProperties"] = False
    return {**components, "Frame": frame}


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
    task_fields: dict[str, Any] = {
        "id": {"type": "integer"},
        "repo": {"type": "string"},
        "issue": {"type": "integer"},
        "title": {"type": "string"},
        "state": {"type": "string"},
        "archived": {"type": "boolean"},
        "pr_url": NULLABLE_STR,
        "cost_usd": {"type": "number"},
        "tokens": {"type": "integer"},
        "last_event": {
            "oneOf": [
                {"type": "null"},
                exact(
                    {"kind": {"type": "string"}, "at": {"type": "string"}, "detail": NULLABLE_STR}
                ),
            ]
        },
        "updated_at": {"type": "string"},
    }
    # The pull request loop (bot.lifecycle.pull_view): on every Board card and task detail.
    task_fields |= {
        "pr_state": {"enum": ["draft", "open", "merged", "closed", None]},
        "review": ref("ReviewCounts"),
        "ready_for_review": {"type": "boolean"},
    }
    return {
        "BoardTask": exact(task_fields),
        "Spend": exact(
            {
                "days": {"type": "integer"},
                "spend": {
                    "type": "array",
                    "items": exact(
                        {
                            "repo": {"type": "string"},
                            "day": {"type": "string"},
                            "tokens": {"type": "integer"},
                            "usd": {"type": "number"},
                        }
                    ),
                },
            }
        ),
        "ReviewCounts": exact(
            {
                "open": {"type": "integer"},
                "addressed": {"type": "integer"},
                "declined": {"type": "integer"},
                "needs_operator": {"type": "integer"},
                "summary": {"type": "string"},
            }
        ),
        "Board": exact(
            {
                "tasks": {"type": "array", "items": ref("BoardTask")},
                "coding_sandbox": ref("CodingSandbox"),
            }
        ),
        "CodingSandbox": exact(
            {
                "mode": {"enum": ["bwrap", "off"]},
                "network": {"enum": ["allowlist", "off"]},
                "warning": NULLABLE_STR,
            }
        ),
        "TaskLog": exact(
            {
                "task": {"type": "integer"},
                "runs": {
                    "type": "array",
                    "items": exact(
                        {
                            "generation": {"type": "integer"},
                            "attempt": {"type": "integer"},
                            "status": {"type": "string"},
                            "at": {"type": "string"},
                            "text": {"type": "string"},
                        }
                    ),
                },
            }
        ),
        "BlockedHost": exact(
            {
                "attempt": {"type": "integer"},
                "host": {"type": "string"},
                "port": {"type": "integer"},
                "count": {"type": "integer"},
                "reason": {"type": "string"},
                "first_at": {"type": "string"},
            }
        ),
        "TaskEvent": exact(
            {
                "id": {"type": "integer"},
                "kind": {"type": "string"},
                "from": NULLABLE_STR,
                "to": NULLABLE_STR,
                "actor": {"type": "string"},
                "at": {"type": "string"},
                "detail": NULLABLE_STR,
                "data": {"type": ["object", "null"]},
            }
        ),
        "TaskDetail": exact(
            {
                **task_fields,
                "origin_session": NULLABLE_STR,
                "generation": {"type": "integer"},
                "attempts": {"type": "integer"},
                "branch": NULLABLE_STR,
                "pr_number": NULLABLE_INT,
                "question": NULLABLE_STR,
                "last_error": NULLABLE_STR,
                "summary": NULLABLE_STR,
                "runtime_session": NULLABLE_STR,
                "usage": exact(
                    {
                        "tokens": {"type": "integer"},
                        "cost_usd": {"type": "number"},
                        "runtime_seconds": {"type": "number"},
                    }
                ),
                "created_at": {"type": "string"},
                "blocked": {"type": "array", "items": ref("BlockedHost")},
                "lease": {
                    "oneOf": [
                        {"type": "null"},
                        exact(
                            {
                                "holder": {"type": "string"},
                                "heartbeat_at": {"type": "string"},
                                "expires_at": {"type": "string"},
                            }
                        ),
                    ]
                },
                "events": {"type": "array", "items": ref("TaskEvent")},
                "review_threads": {"type": "array", "items": ref("ReviewThread")},
                # A plan-first task's plan, and why a queued task waits (its budget).
                "plan": {"oneOf": [{"type": "null"}, ref("TaskPlan")]},
                "held": NULLABLE_STR,
                "estimate": {"oneOf": [{"type": "null"}, ref("TaskEstimate")]},
                "offered": {"type": "array", "items": ref("OfferedDecision")},
                "draft": NULLABLE_STR,
                # Failing CI per head commit (bot.lifecycle.ci_view); GET only.
                "ci": {"type": "array", "items": ref("CiFix")},
            },
            optional=("ci",),
        ),
        "CiFix": exact(
            {
                "head_sha": {"type": "string"},
                "pr_number": {"type": "integer"},
                "checks": {"type": "array", "items": {"type": "string"}},
                "run": {"type": "integer"},
                "of": NULLABLE_INT,
                "verdict": {"enum": ["fix", "needs_human"]},
                "outcome": {
                    "enum": ["queued", "pushed", "unchanged", "superseded", "ended", "stopped"]
                },
                "result_sha": NULLABLE_STR,
                "reason": {"type": "string"},
                "at": {"type": "string"},
                "updated_at": {"type": "string"},
            }
        ),
        "OfferedDecision": exact(
            {
                "issue": {"type": "integer"},
                "task_id": {"type": "integer"},
                "at": {"type": "string"},
                "question": {"type": "string"},
                "decision": {"type": "string"},
                "score": {"type": "number"},
            }
        ),
        "TaskEstimate": exact(
            {
                "runs": {"type": "integer"},
                "tokens": {"type": "integer"},
                "tokens_p90": {"type": "integer"},
                "usd": {"type": ["number", "null"]},
                "usd_p90": {"type": ["number", "null"]},
                "text": {"type": "string"},
            }
        ),
        "TaskPlan": exact(
            {
                "status": {"enum": ["proposed", "approved", "rejected"]},
                "text": {"type": "string"},
                "brief": NULLABLE_STR,
                "edited": {"type": "boolean"},
                "proposed_at": {"type": "string"},
                "decided_at": NULLABLE_STR,
            }
        ),
        "ReviewThread": exact(
            {
                "kind": {"enum": ["comment", "review"]},
                "root_id": {"type": "integer"},
                "pr_number": {"type": "integer"},
                "path": NULLABLE_STR,
                "line": NULLABLE_INT,
                "author": {"type": "string"},
                "state": {"enum": ["open", "addressed", "declined", "needs_operator"]},
                "commit": NULLABLE_STR,
                "reason": NULLABLE_STR,
                "url": NULLABLE_STR,
                "picked_at": NULLABLE_STR,
                "excerpt": {"type": "string"},
                "created_at": {"type": "string"},
                "updated_at": {"type": "string"},
            }
        ),
    }


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
        "Event": {
            "type": "object",
            "required": ["id", "type"],
            "properties": {
                "id": {"type": "integer", "description": "monotonic per operator"},
                "type": {
                    "enum": ["task", "result", "session", "resync", "ledger", "review", "fix_run"]
                },
                "task_id": {"type": "integer"},
                "repo": {"type": "string"},
                "issue": {"type": "integer"},
                "title": {"type": "string"},
                "state": {"type": "string"},
                "pr_url": {"type": ["string", "null"]},
                "cost_usd": {"type": "number"},
                "tokens": {"type": "integer"},
                "reason": {"type": "string"},
                "updated_at": {"type": "string"},
                "session_id": {"type": "string"},
                "kind": {"enum": ["delivered", "question", "failed"]},
                "text": {"type": "string"},
                "message_id": {"type": "string"},
                "change": {"enum": ["created", "updated", "deleted", "summarised"]},
                # `ledger`: the task's pull request loop, as on its Board card.
                "pr_state": {"enum": ["draft", "open", "merged", "closed", None]},
                "review": ref("ReviewCounts"),
                "ready_for_review": {"type": "boolean"},
                # `review`: a review run took threads up; `fix_run`: failing CI started one.
                "pr_number": {"type": "integer"},
                "threads": {"type": "array", "items": {"type": "string"}},
                "at": {"type": "string"},
                "head_sha": {"type": "string"},
                "checks": {"type": "array", "items": {"type": "string"}},
                "run": {"type": "integer"},
                "of": {"type": "integer"},
            },
        },
        **_chat_schemas(),
        **_action_schemas(),
        **_task_schemas(),
    }
