"""/api/operator/chat/decision and /api/operator/chat/file: the operator's explicit actions."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.agents import resolve_agent
from bot.chat.proposals import clear_pending, decision_published, take_pending
from bot.chat.session_views import agent_of
from bot.contracts.chat import MAX_SESSION_ID_CHARS
from bot.contracts.errors import ErrorDetail
from bot.dialogue.titles import issue_title
from bot.errors import BadRequest, Unavailable
from bot.filing import FilingKind, filing_key
from bot.filing_source import CLIENT_HEADER, bind_client
from http_edge.credentials import OPERATOR_ID
from http_edge.validation import issue_number, optional_str, read_json, reject_unknown
from operator_api.deps import OPERATOR_API
from operator_api.json_answers import json_answer
from operator_api.openapi import Endpoints, errors, json_body
from operator_api.schemas import ref
from operator_api.validation import session_id

endpoints = Endpoints()
routes = endpoints.routes
MAX_REQUEST_KEY = 200


def _repo_for(request: web.Request, agent: str | None) -> str:
    """The session's agent's repository; an agent no longer configured is an error, never
    a silent fall back to another repository."""
    return resolve_agent(request.app[OPERATOR_API].settings.agents, agent).repo


def _request_key(request: web.Request, data: dict[str, Any]) -> str | None:
    """The client's idempotency key: the `Idempotency-Key` header, else `request_id`."""
    header = request.headers.get("Idempotency-Key")
    raw = header if header is not None else optional_str(data, "request_id", max_length=200)
    field = "Idempotency-Key" if header is not None else "request_id"
    if raw is None:
        return None
    if not raw.strip() or len(raw) > MAX_REQUEST_KEY:
        raise BadRequest(
            f"{field} must be 1 to {MAX_REQUEST_KEY} characters", detail=ErrorDetail(field=field)
        )
    return raw.strip()


@endpoints.post(
    "/api/operator/chat/decision",
    "Publish a Decision comment (marker once; removes steelframe:needs_human); idempotent by "
    "Idempotency-Key or request_id, never by text",
    {"200": json_body(ref("Published")), **errors(400, 401, 404, 413, 502, 503)},
    body=ref("DecisionRequest"),
    params=[
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "schema": {"type": "string", "minLength": 1, "maxLength": MAX_REQUEST_KEY},
            "description": "one key per publish; a retry with it posts nothing more",
        }
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
    sid = session_id(raw_session, "session_id") if raw_session else None
    operator = request[OPERATOR_ID]
    agent = await api.db.run(agent_of, operator, sid)
    if api.publisher is None:
        raise Unavailable("the GitHub App is not configured: nothing can be published")
    published = await api.publisher.publish(
        _repo_for(request, agent),
        issue,
        body,
        operator_id=operator,
        request_key=_request_key(request, data),
    )
    cleared = await api.db.run(decision_published, operator, session_id=sid, issue=issue)
    if cleared is not None:
        await api.chat_sessions.session_updated(operator, cleared)
    return json_answer(published.as_response())


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
    explicit title/body."""
    bind_client(request.headers.get(CLIENT_HEADER))  # the issue's `from-*` label
    api = request.app[OPERATOR_API]
    data = await read_json(request, limit=api.settings.chat_max_body, required=False)
    reject_unknown(data, {"session", "title", "body"})
    raw_session = optional_str(data, "session", max_length=MAX_SESSION_ID_CHARS)
    sid = session_id(raw_session) if raw_session else None
    title = optional_str(data, "title", max_length=300)
    body = optional_str(data, "body", max_length=api.settings.chat_max_body)
    operator = request[OPERATOR_ID]
    held = await api.db.run(take_pending, operator, session_id=sid)
    proposal = held[1] if held is not None and not (title and title.strip()) else None
    if proposal is None and not (title and title.strip()):
        raise BadRequest(
            "nothing to file: no pending proposal and no title", detail=ErrorDetail(field="title")
        )
    if api.filing is None:
        raise Unavailable("the GitHub App is not configured: nothing can be filed")
    if held is not None and proposal is not None:
        sid = held[0]
    agent = await api.db.run(agent_of, operator, sid)
    if proposal is not None:
        # The proposal's own key: a confirmation in words or a second click files nothing more.
        key, kind = proposal.key, FilingKind(proposal.kind)
        title, body = proposal.title, body if body is not None else proposal.body
    else:
        # Keyed by the title the issue gets (bot.dialogue.titles.issue_title): a retry that
        # trims or spaces it differently is the same filing, not a second issue so titled.
        assert title is not None
        key, kind = filing_key("explicit", operator, sid, issue_title(title)), FilingKind.WORK
    filed = await api.filing.file(
        key=key,
        repo=_repo_for(request, agent),
        title=title,
        body=body or f"Filed from Steelframe Chat by the operator:\n\n{title}",
        kind=kind,
        origin_session=sid,
    )
    if proposal is not None and sid is not None:
        await api.db.run(clear_pending, operator, sid, proposal.key)
        await api.chat_sessions.session_updated(operator, sid)
    return json_answer(filed.as_response(), status=201 if not filed.reused else 200)
