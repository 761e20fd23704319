"""/api/operator/chat/decision and /api/operator/chat/file: the operator's explicit actions."""

from __future__ import annotations

from aiohttp import web

from bot.agents import resolve_agent
from bot.appkeys import SERVICES
from bot.chat import sessions as store
from bot.errors import BadRequest, Unavailable
from bot.filing import FilingKind, filing_key
from operator_api.auth import OPERATOR_ID
from operator_api.openapi import Endpoints, errors, json_body
from operator_api.schemas import ref
from operator_api.validation import (
    issue_number,
    optional_str,
    read_json,
    reject_unknown,
    session_id,
)

endpoints = Endpoints()
routes = endpoints.routes


def _repo_for(request: web.Request, agent: str | None) -> str:
    """The session's agent's repository; an agent no longer configured is an error, never
    a silent fall back to another repository."""
    return resolve_agent(request.app[SERVICES].settings.agents, agent).repo


@endpoints.post(
    "/api/operator/chat/decision",
    "Publish a Decision comment (marker once; removes steelframe:needs_human)",
    {"200": json_body(ref("Published")), **errors(400, 401, 404, 413, 502, 503)},
    body=ref("DecisionRequest"),
)
async def publish_decision(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    data = await read_json(request, limit=services.settings.chat_max_body)
    reject_unknown(data, {"issue", "body", "session_id"})
    if "issue" not in data or data["issue"] is None:
        raise BadRequest("issue is required", detail={"field": "issue"})
    issue = issue_number(data["issue"], "issue")
    body = data.get("body")
    if not isinstance(body, str) or not body.strip():
        raise BadRequest("body is required", detail={"field": "body"})
    raw_session = optional_str(data, "session_id", max_length=64)
    sid = session_id(raw_session, "session_id") if raw_session else None
    operator = request[OPERATOR_ID]
    agent = await services.db.run(store.agent_of, operator, sid)
    if services.publisher is None:
        raise Unavailable("the GitHub App is not configured: nothing can be published")
    published = await services.publisher.publish(_repo_for(request, agent), issue, body)
    await services.db.run(store.decision_published, operator, session_id=sid, issue=issue)
    return web.json_response(published.as_response())


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
    """File the session's pending proposal (the TUI's `y`), or an explicit title/body."""
    services = request.app[SERVICES]
    data = await read_json(request, limit=services.settings.chat_max_body, required=False)
    reject_unknown(data, {"session", "title", "body"})
    raw_session = optional_str(data, "session", max_length=64)
    sid = session_id(raw_session) if raw_session else None
    title = optional_str(data, "title", max_length=300)
    body = optional_str(data, "body", max_length=services.settings.chat_max_body)
    operator = request[OPERATOR_ID]
    pending = await services.db.run(store.take_pending, operator, session_id=sid)
    if not (title and title.strip()):
        if pending is None:
            raise BadRequest(
                "nothing to file: no pending proposal and no title", detail={"field": "title"}
            )
        sid, title, body = pending[0], pending[1], body if body is not None else pending[2]
    kind = (
        FilingKind(pending[3]) if pending is not None and title == pending[1] else FilingKind.WORK
    )
    if services.filing is None:
        raise Unavailable("the GitHub App is not configured: nothing can be filed")
    agent = await services.db.run(store.agent_of, operator, sid)
    filed = await services.filing.file(
        key=filing_key("explicit", operator, sid, title),
        repo=_repo_for(request, agent),
        title=title,
        body=body or f"Filed from Steelframe Chat by the operator:\n\n{title}",
        kind=kind,
        origin_session=sid,
    )
    if pending is not None and sid == pending[0]:
        await services.db.run(store.clear_pending, operator, sid)
    return web.json_response(filed.as_response(), status=201 if not filed.reused else 200)
