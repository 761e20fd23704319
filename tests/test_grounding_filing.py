"""Questions are never proposals, and one filing grammar (issue 31): the offline runtime and
the server's intent policy read the operator's requests through the same functions
(bot/dialogue/phrasing.py), so what files in one files in the other; a question about whether to
do something gets an answer in both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.chat.intents import DraftOnlyPolicy, IntentContext
from bot.chat.session_rows import UNSET
from bot.chat.session_store import TurnSession
from bot.config import AgentConfig
from bot.dialogue.phrasing import filing_request, operator_asked_to_file, operator_asked_to_remember
from bot.dialogue.trailer import Intent, Trailer
from bot.runtimes.base import RuntimeRequest, TurnFacts
from bot.runtimes.offline import OfflineRuntime, compose
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox
from tests.fakes.hits import retrieved_hit

HIT = retrieved_hit(id=1, source="pull_request", issue=33, text="PR #33 Sign firmware via KMS")
REQUESTS = [
    ("file an issue for the flaky login test", "the flaky login test"),
    ("Please open a ticket: checkout is slow", "checkout is slow"),
    ("let's file an issue for the slow export", "the slow export"),
    ("Can you create a new issue about the cache?", "the cache"),
    ("I need an issue filed for the broken footer", "the broken footer"),
    ("go ahead and file an issue for the slow build", "the slow build"),
    ("please raise a bug about the login redirect", "the login redirect"),
    ("log a ticket for the 500 on /export", "the 500 on /export"),
]
WHETHER = [
    "What does PR #33 change, and should we do what it asks?",
    "Should we file an issue about the rollout dashboard?",
    "Is it worth opening a ticket for the IP exhaustion in production too?",
    "Do you think we should propose a follow-up for the 2026 certificates?",
    "What should we do next about the pairing bug?",
    "should we file it?",
]


def _offline(message: str) -> Trailer:
    facts = TurnFacts(message=message, hits=[HIT])
    return compose(RuntimeRequest(system="", messages=[], facts=facts))[1]


@pytest.mark.parametrize(("message", "title"), REQUESTS)
def test_a_request_files_in_the_policy_and_the_offline_runtime_alike(
    message: str, title: str
) -> None:
    assert operator_asked_to_file(message)
    assert filing_request(message) == title
    trailer = _offline(message)
    assert trailer.intent is Intent.FILE_WORK
    assert trailer.title == title


def test_a_request_naming_no_subject_takes_its_title_from_the_message() -> None:
    trailer = _offline("The build broke again. File an issue for it.")
    assert trailer.intent is Intent.FILE_WORK and trailer.title.startswith("The build broke again")


def test_remember_requests_are_read_by_the_same_grammar() -> None:
    message = "Please remember: no Friday deploys"
    assert operator_asked_to_remember(message)
    trailer = _offline(message)
    assert trailer.intent is Intent.FILE_MEMORY and trailer.body == "no Friday deploys"


@pytest.mark.parametrize("message", WHETHER)
def test_a_question_about_whether_to_act_is_answered_offline(message: str) -> None:
    assert not operator_asked_to_file(message)
    assert _offline(message).intent is Intent.ANSWER


@pytest.mark.parametrize("message", WHETHER)
async def test_a_models_proposal_on_such_a_question_is_not_held(message: str) -> None:
    session = TurnSession("s", "default", None, 11, "discuss", None, None)
    ctx = IntentContext(
        operator_id=1,
        turn_id="t",
        message=message,
        trailer=Trailer(intent=Intent.PROPOSE_WORK, title="Follow up", body="b"),
        session=session,
        agent=AgentConfig(name="default", repo="o/r", checkout=Path("."), runtime="offline"),
    )
    outcome = await DraftOnlyPolicy().apply(ctx)
    assert outcome.intent is Intent.ANSWER and outcome.pending is UNSET  # nothing held
    assert any("never a proposal" in note for note in outcome.notes)


async def test_through_the_chat_turn_a_request_is_held_and_a_question_is_answered(
    api: ApiClient,
) -> None:
    """`steelframe dev` (offline runtime, no GitHub App): "let's file an issue for ..." is
    held for the operator's confirmation; a question about whether to act leaves nothing."""
    asked = await (
        await api.post(
            "/api/operator/chat", json={"message": "What should we do about the slow export?"}
        )
    ).json()
    assert asked["intent"] == "answer" and asked["pending_title"] is None
    filed = await (
        await api.post(
            "/api/operator/chat",
            json={
                "message": "let's file an issue for the slow export",
                "session": asked["session"],
            },
        )
    ).json()
    assert filed["intent"] == "file_work" and filed["pending_title"] == "the slow export"


@pytest.mark.parametrize(
    "message", ["let's file an issue for the slow export", "file an issue for the slow export"]
)
async def test_in_dev_a_request_files_through_the_offline_runtime_and_the_policy(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str, message: str
) -> None:
    """What `steelframe dev` composes (the sandbox's App, the offline runtime, the filing
    policy): both read the request with the one grammar, so it files on that turn."""
    settings = github_sandbox.settings(tmp_path, redis_url=redis_url)
    api = await api_factory(settings, runtimes=lambda agent: OfflineRuntime())
    response = await api.post("/api/operator/chat", json={"message": message})
    assert response.status == 200, await response.text()
    done = await response.json()
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    [issue] = [issue for issue in repo.issues.values() if not issue.is_pull]
    assert issue.title == "the slow export"
    assert done["intent"] == "file_work" and done["filed_issue_number"] == issue.number
