"""/api/operator/chat/decision and /api/operator/chat/file: the operator's explicit actions."""

from __future__ import annotations

from aiohttp import web

from bot.chat.decision_publish import PublishRequest, publish_from_chat
from bot.chat.explicit_filing import FileRequest, file_from_chat
from bot.contracts.chat import MAX_SESSION_ID_CHARS
from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest
from bot.filing_source import CLIENT_HEADER, bind_client
from http_edge.credentials import OPERATOR_ID
from http_edge.validation import issue_number, optional_str, read_json, reject_unknown
from operator_api.deps import OPERATOR_API
from operator_api.json_answers import json_answer
from operator_api.openapi import Endpoints, errors, idempotency_key, json_body
from operator_api.schemas import ref
from operator_api.validation import request_key, session_id

endpoints = Endpoints()
routes = endpoints.routes


@endpoints.post(
    "/api/operator/chat/decision",
    "Publish a Decision comment (marker once; removes steelframe:needs_human); idempotent by "
    "Idempotency-Key or request_id, never by text",
    {"200": json_body(ref("Published")), **errors(400, 401, 404, 409, 413, 422, 502, 503)},
    body=ref("DecisionRequest"),
    params=[
        idempotency_key(
            "one key per publish; a retry with it posts nothing more, another Decision with it"
            " is a 422"
        )
    ],
)
async def publish_decision(request: web.Request) -> web.Response:
    api = request.app[OPERATOR_API]
    data = await read_json(request, limit=api.settings.chat_max_body)
    reject_unknown(data, {"issue", "body", "session_id", "request_id"})
    if "issue" not in data or data["issue"] is None:
        raise BadRequest("issue is required", detail=ErrorDetail(field="issue"))
    issue = issue_number(data["issue"], "issue")
    body = data.get("body")
    if body is not None and not isinstance(body, str):
        raise BadRequest("body must be a string", detail=ErrorDetail(field="body"))
    if body is None or not body.strip():
        raise BadRequest("body is required", detail=ErrorDetail(field="body"))
    raw_session = optional_str(data, "session_id", max_length=MAX_SESSION_ID_CHARS)
    operator = request[OPERATOR_ID]
    done = await publish_from_chat(
        PublishRequest(
            operator_id=operator,
            issue=issue,
            body=body,
            session_id=session_id(raw_session, "session_id") if raw_session else None,
            key=request_key(request, data),
        ),
        db=api.db,
        publisher=api.publisher,
        agents=api.settings.agents,
    )
    if done.cleared_session is not None:  # its draft is gone: other clients show it
        await api.chat_sessions.session_updated(operator, done.cleared_session)
    return json_answer(done.published.as_response())


@endpoints.post(
    "/api/operator/chat/file",
    "File the session's pending proposal (or an explicit title/body) as an issue",
    {
        "201": json_body(ref("Filed"), "Filed"),
        "200": json_body(ref("Filed"), "Filed before (same key): the same issue"),
        **errors(400, 401, 404, 413, 502, 503),
    },
    body=ref("FileRequest"),
    body_required=False,
)
async def file_pending(request: web.Request) -> web.Response:
    """File the session's pending proposal (the TUI's `y`, the GUI's File button), or an
    explicit title/body (bot.chat.explicit_filing)."""
    bind_client(request.headers.get(CLIENT_HEADER))  # the issue's `from-*` label
    api = request.app[OPERATOR_API]
    data = await read_json(request, limit=api.settings.chat_max_body, required=False)
    reject_unknown(data, {"session", "title", "body"})
    raw_session = optional_str(data, "session", max_length=MAX_SESSION_ID_CHARS)
    done = await file_from_chat(
        FileRequest(
            operator_id=request[OPERATOR_ID],
            session_id=session_id(raw_session) if raw_session else None,
            title=optional_str(data, "title", max_length=300),
            body=optional_str(data, "body", max_length=api.settings.chat_max_body),
        ),
        db=api.db,
        filing=api.filing,
        agents=api.settings.agents,
    )
    if done.session_id is not None:  # its history has the note now: other clients show it
        await api.chat_sessions.session_updated(request[OPERATOR_ID], done.session_id)
    filed = done.filed
    return json_answer(filed.as_response(), status=201 if not filed.reused else 200)
