"""Discuss sessions, Decision drafts and Publish, against the GitHub sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.decisions import DECISION_MARKER, NEEDS_HUMAN_LABEL
from bot.github.records import MAX_BODY
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox

DRAFT = "draft a decision: ship the fix behind a feature flag"


@pytest.fixture
async def service(api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path) -> ApiClient:
    settings = github_sandbox.settings(tmp_path, agents_json={"other": {"repo": SANDBOX_REPO}})
    return await api_factory(settings)


@pytest.fixture
async def issue(service: ApiClient) -> int:
    github = service.services.github
    assert github is not None
    made = await github.create_issue(
        SANDBOX_REPO, title="Login flakes", body="b", labels=[NEEDS_HUMAN_LABEL]
    )
    return made.number


def comments(sandbox: GitHubSandbox, number: int) -> list[str]:
    repo = sandbox.sandbox.world.repo(SANDBOX_REPO)
    return [c.body for c in repo.comments.values() if c.issue_number == number]


def labels(sandbox: GitHubSandbox, number: int) -> list[str]:
    return list(sandbox.sandbox.world.repo(SANDBOX_REPO).issues[number].labels)


async def _discuss(api: ApiClient, number: int) -> str:
    session = await (await api.post("/api/operator/chat/new", json={"issue": number})).json()
    assert session["title"] == f"Discuss #{number}" and session["focus"] == number
    return str(session["id"])


async def _draft(api: ApiClient, session: str) -> dict[str, Any]:
    done = await (
        await api.post("/api/operator/chat", json={"message": DRAFT, "session": session})
    ).json()
    assert done["intent"] == "decide"
    return dict(done)


async def _decision(api: ApiClient, session: str) -> Any:
    return (await (await api.get(f"/api/operator/chat/session/{session}")).json())["decision"]


async def test_decide_drafts_without_posting_and_the_draft_survives_and_reopens(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    session = await _discuss(service, issue)
    done = await _draft(service, session)
    assert done["decision_body"] == "ship the fix behind a feature flag"
    assert done["decision_issue"] == issue
    assert comments(github_sandbox, issue) == []  # nothing posted on that turn
    later = await (
        await service.post(
            "/api/operator/chat", json={"message": "and the risks?", "session": session}
        )
    ).json()
    assert later["intent"] == "answer" and later["decision_body"] == done["decision_body"]
    assert (await _decision(service, session)) == {"body": done["decision_body"], "issue": issue}


async def test_decide_without_focus_stores_no_draft(service: ApiClient) -> None:
    done = await (await service.post("/api/operator/chat", json={"message": DRAFT})).json()
    assert done["decision_body"] is None


@pytest.mark.parametrize("event", ["focus_clear", "new_chat", "discuss", "agent_switch"])
async def test_each_clearing_event_clears_the_draft(
    service: ApiClient, issue: int, event: str
) -> None:
    session = await _discuss(service, issue)
    await _draft(service, session)
    if event == "focus_clear":
        await service.post(
            "/api/operator/chat", json={"message": "unfocus", "session": session, "focus": None}
        )
    elif event == "new_chat":
        await service.post("/api/operator/chat/new", json={})
    elif event == "discuss":
        assert service.services.github is not None
        other = await service.services.github.create_issue(SANDBOX_REPO, title="t", body="b")
        started = await service.post("/api/operator/chat/new", json={"issue": other.number})
        assert started.status == 201
    else:
        await service.post(
            "/api/operator/chat", json={"message": "switch", "session": session, "agent": "other"}
        )
    assert await _decision(service, session) is None


async def test_publish_posts_one_marked_comment_removes_needs_human_and_clears_the_draft(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    session = await _discuss(service, issue)
    done = await _draft(service, session)
    body = f"{DECISION_MARKER}\n{done['decision_body']}"  # the operator pasted the marker
    response = await service.post(
        "/api/operator/chat/decision", json={"issue": issue, "body": body, "session_id": session}
    )
    assert response.status == 200
    published = await response.json()
    [comment] = comments(github_sandbox, issue)
    assert comment.count("steelframe-decision") == 1 and comment.startswith(DECISION_MARKER)
    assert "ship the fix behind a feature flag" in comment
    assert published["comment_url"].endswith(f"#issuecomment-{published['comment_id']}")
    assert NEEDS_HUMAN_LABEL not in labels(github_sandbox, issue)
    assert await _decision(service, session) is None


async def test_double_clicked_and_retried_publish_with_one_key_posts_one_comment(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    payload = {"issue": issue, "body": "Go with option B."}
    key = {"Idempotency-Key": "click-1"}
    first, second = await asyncio.gather(
        service.post("/api/operator/chat/decision", json=payload, headers=key),
        service.post("/api/operator/chat/decision", json=payload, headers=key),
    )
    retry = await service.post(
        "/api/operator/chat/decision", json={**payload, "request_id": "click-1"}
    )
    ids = {(await r.json())["comment_id"] for r in (first, second, retry)}
    assert len(ids) == 1 and len(comments(github_sandbox, issue)) == 1


def _comments_fail_at_once(sandbox: GitHubSandbox, number: int) -> None:
    """The next comment POST fails before GitHub stores anything: a rate limit too long to
    wait out fails it at once."""
    path = f"/repos/{SANDBOX_REPO}/issues/{number}/comments"
    sandbox.fail("secondary_rate_limit", method="POST", path=path, retry_after=3600)


@pytest.mark.parametrize("first_failed", [False, True], ids=["after-it-posted", "after-it-failed"])
async def test_the_same_key_with_another_decision_is_422_and_posts_nothing(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int, first_failed: bool
) -> None:
    """A key names one Decision (IETF draft "The Idempotency-Key HTTP Header Field", 2.7):
    other words under it, as a header or as `request_id`, are a 422 that says so, and post
    nothing and clear no draft, whether the key's publish posted or failed before posting.
    The key's own Decision sent again answers its comment, or, after the failure (which
    spent nothing but the key), posts it once."""
    session = await _discuss(service, issue)
    await _draft(service, session)
    key = {"Idempotency-Key": "click-7"}
    chosen = {"issue": issue, "body": "Go with option B.", "session_id": session}
    if first_failed:
        _comments_fail_at_once(github_sandbox, issue)
    first = await service.post("/api/operator/chat/decision", json=chosen, headers=key)
    assert first.status == (503 if first_failed else 200)

    other = {**chosen, "body": "No: option C."}
    for headers, payload in [(key, other), ({}, {**other, "request_id": "click-7"})]:
        refused = await service.post("/api/operator/chat/decision", json=payload, headers=headers)
        assert refused.status == 422
        answer = await refused.json()
        assert answer["code"] == "idempotency_key_reused"
        assert answer["error"] == (
            "this Idempotency-Key was used for another Decision; send a new Decision with a new key"
        )
        assert answer["detail"] == {"field": "Idempotency-Key"}
    posted = comments(github_sandbox, issue)
    assert len(posted) == (0 if first_failed else 1)
    assert not any("option C" in body for body in posted)
    assert (await _decision(service, session) is not None) == first_failed

    # The key's own Decision: after the failure it posts, once; then it is answered.
    answers = [
        await service.post("/api/operator/chat/decision", json=chosen, headers=key)
        for _ in range(2)
    ]
    assert [answer.status for answer in answers] == [200, 200]
    ids = {(await answer.json())["comment_id"] for answer in answers}
    if not first_failed:
        ids.add((await first.json())["comment_id"])
    assert len(ids) == 1
    [comment] = comments(github_sandbox, issue)
    assert "Go with option B." in comment and "option C" not in comment
    assert await _decision(service, session) is None


async def test_two_decisions_sent_together_with_one_key_post_one_and_refuse_the_other(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    """A double click that sent two texts: whichever claims the key first posts; the other
    is refused at once (not made to wait and answered with the first's comment)."""
    key = {"Idempotency-Key": "click-8"}
    bodies = ["Go with option B.", "No: option C."]
    answers = await asyncio.gather(
        *(
            service.post(
                "/api/operator/chat/decision", json={"issue": issue, "body": body}, headers=key
            )
            for body in bodies
        )
    )
    assert sorted(answer.status for answer in answers) == [200, 422]
    [won] = [body for body, answer in zip(bodies, answers, strict=True) if answer.status == 200]
    [comment] = comments(github_sandbox, issue)
    assert won in comment and not any(b in comment for b in bodies if b != won)


async def test_a_request_key_of_the_wrong_shape_is_400_and_posts_nothing(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    payload = {"issue": issue, "body": "Go with option B."}
    for headers, body, field in [
        ({"Idempotency-Key": " "}, payload, "Idempotency-Key"),
        ({}, {**payload, "request_id": "x" * 201}, "request_id"),
        ({}, {**payload, "request_id": 5}, "request_id"),
    ]:
        response = await service.post("/api/operator/chat/decision", json=body, headers=headers)
        assert response.status == 400
        assert (await response.json())["detail"]["field"] == field
    assert comments(github_sandbox, issue) == []


async def test_publish_survives_a_5xx_after_the_comment_was_stored(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    github_sandbox.fail(
        "server_error",
        method="POST",
        path=f"/repos/{SANDBOX_REPO}/issues/{issue}/comments",
        times=3,
        after_effect=True,
    )
    response = await service.post(
        "/api/operator/chat/decision", json={"issue": issue, "body": "Option C."}
    )
    assert response.status == 200
    assert len(comments(github_sandbox, issue)) == 1


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"body": "x"}, "issue"),
        ({"issue": 1, "body": "   "}, "body"),
        ({"issue": 1}, "body"),
        ({"issue": 0, "body": "x"}, "issue"),
        ({"issue": "1", "body": "x"}, "issue"),
        ({"issue": 1, "body": 5}, "body"),
        ({"issue": 1, "body": "x", "extra": True}, "extra"),
    ],
)
async def test_publish_bad_input_is_400_and_posts_nothing(
    service: ApiClient,
    github_sandbox: GitHubSandbox,
    issue: int,
    payload: dict[str, Any],
    field: str,
) -> None:
    response = await service.post("/api/operator/chat/decision", json=payload)
    assert response.status == 400
    assert (await response.json())["detail"]["field"] == field
    assert comments(github_sandbox, issue) == []


async def test_publish_to_a_missing_issue_is_404_naming_it_with_githubs_message(
    service: ApiClient,
) -> None:
    response = await service.post("/api/operator/chat/decision", json={"issue": 999, "body": "x"})
    assert response.status == 404
    answer = await response.json()
    assert answer["error"] == f"issue #999 not found in {SANDBOX_REPO} (GitHub: Not Found)"
    assert answer["detail"]["field"] == "issue" and answer["detail"]["github_status"] == 404


async def test_the_same_words_published_again_post_again(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    """Two questions answered "Yes, go ahead." are two Decisions: each explicit publish (a
    new key, or none) posts; only a retry with the first key answers the first comment."""
    payload = {"issue": issue, "body": "Yes, go ahead."}
    first = await (await service.post("/api/operator/chat/decision", json=payload)).json()
    second = await (await service.post("/api/operator/chat/decision", json=payload)).json()
    keyed = {**payload, "request_id": "answer-2"}
    third = await (await service.post("/api/operator/chat/decision", json=keyed)).json()
    retried = await (await service.post("/api/operator/chat/decision", json=keyed)).json()
    assert len({first["comment_id"], second["comment_id"], third["comment_id"]}) == 3
    assert retried["comment_id"] == third["comment_id"]
    assert len(comments(github_sandbox, issue)) == 3


async def test_a_marker_typed_by_someone_else_is_never_taken_for_the_publish(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    from bot.decisions import publish_key

    publisher = service.services.publisher
    assert publisher is not None
    key = publish_key(1, SANDBOX_REPO, issue, "d-1").removeprefix("publish:")
    token = github_sandbox.user_token("mallory", "read")
    async with service.raw.session.post(
        f"{github_sandbox.url}/repos/{SANDBOX_REPO}/issues/{issue}/comments",
        json={"body": f"<!-- steelframe-publish:{key} --> not a decision"},
        headers={"Authorization": f"token {token}"},
    ) as response:
        spoof = (await response.json())["id"]
    path = f"/repos/{SANDBOX_REPO}/issues/{issue}/comments"
    # A rate limit too long to wait out fails the POST at once, so the reconcile look-up runs.
    github_sandbox.fail("secondary_rate_limit", method="POST", path=path, retry_after=3600)
    with pytest.raises(Exception):  # noqa: B017 - GitHub kept failing; the spoof not adopted
        await publisher.publish(SANDBOX_REPO, issue, "Option D.", operator_id=1, request_key="d-1")
    github_sandbox.sandbox.faults.clear()
    published = await publisher.publish(
        SANDBOX_REPO, issue, "Option D.", operator_id=1, request_key="d-1"
    )
    assert published.comment_id != spoof


async def test_a_decision_longer_than_a_comment_takes_is_400_and_its_key_stays_unspent(
    service: ApiClient, github_sandbox: GitHubSandbox, issue: int
) -> None:
    key = {"Idempotency-Key": "long-1"}
    payload = {"issue": issue, "body": "x" * MAX_BODY}
    response = await service.post("/api/operator/chat/decision", json=payload, headers=key)
    assert response.status == 400
    answer = await response.json()
    assert answer["detail"]["field"] == "body" and "65536" in answer["error"]
    assert comments(github_sandbox, issue) == []
    again = await service.post(
        "/api/operator/chat/decision", json={**payload, "body": "Shorter."}, headers=key
    )
    assert again.status == 200
    [comment] = comments(github_sandbox, issue)
    assert "Shorter." in comment
