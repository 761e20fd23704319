"""Publish from Chat, its core (bot.chat.decision_publish) called as the handler calls it,
against the GitHub sandbox: the repository is the session's agent's (an agent no longer
configured publishes nowhere and keeps the draft), a retry with the key posts nothing more,
and the draft the publish answered is the one cleared: not a draft for another issue, nor one
a turn wrote while the comment was being posted. (The HTTP route's answers:
tests/test_decisions.py.)"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import select

from bot.chat.decision_publish import PublishRequest, publish_from_chat
from bot.decisions import DecisionPublisher, Published
from bot.errors import BadRequest, NotFound, Unavailable
from bot.models import ChatSession
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox
from tests.test_decisions import _decision, _discuss, _draft, comments
from tests.test_decisions import issue as issue  # the `issue` fixture
from tests.test_decisions import service as service  # the `service` fixture


def owner(api: ApiClient, session: str) -> int:
    found: int = api.services.db.call(
        lambda s: s.scalar(select(ChatSession.operator_id).where(ChatSession.id == session))
    )
    return found


async def test_a_session_whose_agent_is_gone_publishes_nowhere_then_once_per_key(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    session = await _discuss(service, issue)  # the default agent's session
    await _draft(service, session)
    parts = service.services
    request = PublishRequest(
        operator_id=owner(service, session),
        issue=issue,
        body="Ship it behind a flag.",
        session_id=session,
        key="click-1",
    )
    without_default = {"other": parts.settings.agents["other"]}  # same repo, another name

    with pytest.raises(BadRequest) as refused:
        await publish_from_chat(
            request, db=parts.db, publisher=parts.publisher, agents=without_default
        )
    assert refused.value.detail is not None and refused.value.detail.field == "agent"
    assert comments(github_sandbox, issue) == []
    assert await _decision(service, session) is not None  # the draft is kept

    agents = parts.settings.agents
    done = await publish_from_chat(request, db=parts.db, publisher=parts.publisher, agents=agents)
    again = await publish_from_chat(request, db=parts.db, publisher=parts.publisher, agents=agents)
    assert done.cleared_session == session and await _decision(service, session) is None
    assert again.published.reused and not done.published.reused
    assert again.published.comment_id == done.published.comment_id
    assert len(comments(github_sandbox, issue)) == 1


async def test_the_active_sessions_draft_is_cleared_only_by_a_publish_on_its_issue(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    session = await _discuss(service, issue)  # the active session, its draft for `issue`
    await _draft(service, session)
    parts = service.services
    operator = owner(service, session)
    other_issue = issue + 1000  # not in the sandbox: GitHub says so, nothing is cleared

    def publish(number: int) -> PublishRequest:
        return PublishRequest(
            operator_id=operator, issue=number, body="Go.", session_id=None, key=None
        )

    agents = parts.settings.agents
    with pytest.raises(NotFound):
        await publish_from_chat(
            publish(other_issue), db=parts.db, publisher=parts.publisher, agents=agents
        )
    assert await _decision(service, session) is not None
    done = await publish_from_chat(
        publish(issue), db=parts.db, publisher=parts.publisher, agents=agents
    )
    assert done.cleared_session == session and await _decision(service, session) is None

    # Without a GitHub App nothing is published; another operator's session is not found
    # first (it is not theirs to name).
    with pytest.raises(Unavailable):
        await publish_from_chat(publish(issue), db=parts.db, publisher=None, agents=agents)
    stranger = PublishRequest(
        operator_id=operator + 1000, issue=issue, body="Go.", session_id=session, key=None
    )
    with pytest.raises(NotFound):
        await publish_from_chat(stranger, db=parts.db, publisher=None, agents=agents)
    assert len(comments(github_sandbox, issue)) == 1


class RedraftingPublisher(DecisionPublisher):
    """Posts the comment, then has a turn draft again before the publish goes on: a draft
    written in the window between posting (a GitHub round trip or several, with retries)
    and clearing."""

    def __init__(self, publisher: DecisionPublisher, redraft: Callable[[], Awaitable[None]]):
        super().__init__(db=publisher.db, github=publisher.github, clock=publisher.clock)
        self.redraft = redraft

    async def publish(self, *args: Any, **kwargs: Any) -> Published:
        published = await super().publish(*args, **kwargs)
        await self.redraft()
        return published


async def test_a_draft_written_while_the_publish_posts_stays(
    service: ApiClient, issue: int
) -> None:
    session = await _discuss(service, issue)
    await _draft(service, session)
    parts = service.services
    assert parts.publisher is not None

    async def redraft() -> None:
        done = await service.post(
            "/api/operator/chat",
            json={"message": "draft a decision: ship it without the flag", "session": session},
        )
        assert (await done.json())["decision_body"] == "ship it without the flag"

    request = PublishRequest(
        operator_id=owner(service, session),
        issue=issue,
        body="Ship it behind a flag.",
        session_id=session,
        key=None,
    )
    agents = parts.settings.agents
    posting = RedraftingPublisher(parts.publisher, redraft)
    done = await publish_from_chat(request, db=parts.db, publisher=posting, agents=agents)
    assert done.cleared_session is None
    assert await _decision(service, session) == {"body": "ship it without the flag", "issue": issue}
    # That draft is the one the next publish answers.
    done = await publish_from_chat(request, db=parts.db, publisher=parts.publisher, agents=agents)
    assert done.cleared_session == session and await _decision(service, session) is None


async def test_a_publish_on_another_issue_leaves_the_named_sessions_draft(
    service: ApiClient, issue: int
) -> None:
    session = await _discuss(service, issue)
    answered = await _draft(service, session)
    parts = service.services
    assert parts.github is not None
    other = await parts.github.create_issue(SANDBOX_REPO, title="t", body="b")
    request = PublishRequest(
        operator_id=owner(service, session),
        issue=other.number,
        body="No.",
        session_id=session,
        key=None,
    )
    agents = parts.settings.agents
    done = await publish_from_chat(request, db=parts.db, publisher=parts.publisher, agents=agents)
    assert done.cleared_session is None
    assert await _decision(service, session) == {"body": answered["decision_body"], "issue": issue}
