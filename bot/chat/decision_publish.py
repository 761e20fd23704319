"""The operator's Publish from Chat (the GUI's Publish bar, the TUI's publish,
`POST /api/operator/chat/decision`): the Decision posted on the issue through the GitHub App
(bot.decisions, once per client key), in the repository of the session's agent, and the
Decision draft it answered cleared (spec: the draft clears on Publish success), but not a
draft written while it posted. Knows nothing of HTTP."""

from __future__ import annotations

from dataclasses import dataclass

from bot.agents import resolve_agent
from bot.chat.proposals import decision_published, draft_answered
from bot.chat.session_views import agent_of
from bot.config import AgentConfig
from bot.db import Database
from bot.decisions import DecisionPublisher, Published
from bot.errors import Unavailable


@dataclass(frozen=True)
class PublishRequest:
    """What the operator published: `body` on `issue`, from `session_id` (None: the active
    session), once per `key` (None: this request is a publish of its own)."""

    operator_id: int
    issue: int
    body: str
    session_id: str | None
    key: str | None


@dataclass(frozen=True)
class ChatPublish:
    """The comment posted (or found posted under the same key) and the session whose
    Decision draft it cleared (None: no draft was cleared)."""

    published: Published
    cleared_session: str | None


async def publish_from_chat(
    request: PublishRequest,
    *,
    db: Database,
    publisher: DecisionPublisher | None,
    agents: dict[str, AgentConfig],
) -> ChatPublish:
    """Publish in the repository of the session's agent (a session of another operator is
    NotFound; its agent no longer configured is an error, never a silent fall back to
    another repository), then clear the draft it answered: the named session's, else the
    active session's, draft for that issue as it was when the publish began (a turn may
    draft again while the comment is posted; that draft stays)."""
    agent = await db.run(agent_of, request.operator_id, request.session_id)
    if publisher is None:
        raise Unavailable("the GitHub App is not configured: nothing can be published")
    answered = await db.run(
        draft_answered, request.operator_id, session_id=request.session_id, issue=request.issue
    )
    published = await publisher.publish(
        resolve_agent(agents, agent).repo,
        request.issue,
        request.body,
        operator_id=request.operator_id,
        request_key=request.key,
    )
    if answered is None or not await db.run(decision_published, request.operator_id, answered):
        return ChatPublish(published, None)
    return ChatPublish(published, answered.session_id)
