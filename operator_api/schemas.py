"""The operator API's JSON shapes (OpenAPI 3.1 components, i.e. JSON Schema 2020-12).

Response objects list every key they carry as `required` and allow no other keys, so a
generated client gets exact types and the test suite's response check (tests/conftest.py)
fails on a key the service sends but this document does not name.

The answers (chat, the task JSON, the events stream's frames, the explicit actions, /healthz
and /readyz) are generated from their Structs (bot.contracts), where a key two answers share
is declared once. Written here as tables, one entry per key, are only the request bodies
(`request_object`) and the spend chart's answer (`exact`): rows such as
`"title": {"type": ["string", "null"]}` repeat in them because several bodies carry such
keys, not copied logic.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import msgspec

from bot.contracts import chat
from bot.contracts.actions import Filed, Published
from bot.contracts.errors import ErrorBody
from bot.contracts.events import EventFrame
from bot.contracts.health import Health, Readiness
from bot.contracts.tasks import Board, TaskDetail, TaskLog

REF_TEMPLATE = "#/components/schemas/{name}"
NULLABLE_STR = {"type": ["string", "null"]}
NULLABLE_INT = {"type": ["integer", "null"]}
# A session id and an agent name, as the handlers take them (bot.contracts.chat's limits).
SESSION_ID = {"type": ["string", "null"], "minLength": 1, "maxLength": chat.MAX_SESSION_ID_CHARS}
AGENT_NAME = {"type": ["string", "null"], "maxLength": chat.MAX_AGENT_NAME_CHARS}


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


def _any_json(kind: type) -> dict[str, Any]:
    """msgspec's schema hook: a value we pass through unread (in a stored message's metadata,
    bot.contracts.turn_meta.TurnMeta: a filing's outcome, a hit as JSON, the issue's facts)."""
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
    """The explicit actions' requests, and their answers generated from their Structs
    (bot.contracts.actions)."""
    _, answers = msgspec.json.schema_components([Published, Filed], ref_template=REF_TEMPLATE)
    return {
        **answers,
        "DecisionRequest": request_object(
            {
                "issue": {"type": "integer", "minimum": 1},
                "body": {"type": "string", "minLength": 1},
                "session_id": {**SESSION_ID, "type": "string"},
                "request_id": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 200,
                    "description": "idempotency key (or the Idempotency-Key header)",
                },
            },
            required=("issue", "body"),
        ),
        "FileRequest": request_object(
            {
                "session": SESSION_ID,
                "title": {"type": ["string", "null"], "maxLength": 300},
                "body": {"type": ["string", "null"]},
            }
        ),
        "ClearRequest": request_object({"session": SESSION_ID}),
        "NewSessionRequest": request_object(
            {
                "title": {"type": ["string", "null"], "maxLength": 200},
                "issue": {"type": ["integer", "null"], "minimum": 1},
                "agent": AGENT_NAME,
            }
        ),
    }


def _task_schemas() -> dict[str, Any]:
    """The task JSON's components, generated from its Structs (bot.contracts.tasks)."""
    _, components = msgspec.json.schema_components(
        [Board, TaskDetail, TaskLog], ref_template=REF_TEMPLATE
    )
    # The spend chart's answer (operator_api/spend_routes.py), not task JSON.
    return {
        **components,
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
    }


def _event_schemas() -> dict[str, Any]:
    """The events stream's frames (bot.contracts.events): `Event` is their union."""
    (event,), components = msgspec.json.schema_components([EventFrame], ref_template=REF_TEMPLATE)
    return {"Event": event, **components}


def _health_schemas() -> dict[str, Any]:
    """/healthz's and /readyz's answers, generated from their Structs (bot.contracts.health)."""
    _, components = msgspec.json.schema_components([Health, Readiness], ref_template=REF_TEMPLATE)
    return components


def _error_schemas() -> dict[str, Any]:
    """Every error answer's body (`Error`) and its detail, generated from their Structs
    (bot.contracts.errors); the body keeps the name the operations refer to, and is titled
    by it (msgspec titles it after the Struct, `ErrorBody`, a name the document has not)."""
    _, components = msgspec.json.schema_components([ErrorBody], ref_template=REF_TEMPLATE)
    return {"Error": {**components.pop("ErrorBody"), "title": "Error"}, **components}


def component_schemas() -> dict[str, Any]:
    """A fresh copy each call: every app's document owns its schemas. Generated once per
    process (they depend on the code alone), copied for each app: generating them was most
    of what building an app cost (a test builds one per test, `serve --processes` one a
    process)."""
    return copy.deepcopy(_generated_schemas())


@functools.cache
def _generated_schemas() -> dict[str, Any]:
    return {
        **_error_schemas(),
        **_health_schemas(),
        **_chat_schemas(),
        **_action_schemas(),
        **_task_schemas(),
        **_event_schemas(),
    }
