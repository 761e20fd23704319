"""Retries, backoff and rate-limit waits, against failures injected into the sandbox.

The client and the sandbox share a fake clock, so the waits GitHub's rules ask for are
recorded, not slept."""

from __future__ import annotations

import pytest

from bot.github.client import GitHubClient
from bot.github.errors import GitHubRateLimited, GitHubRejected, GitHubUnavailable
from tests.conftest import SANDBOX_REPO, FakeTime, GitHubSandbox
from tests.fakes.git import branch_with_commit
from tests.fakes.ports import refused_port

ISSUE_PATH = f"/repos/{SANDBOX_REPO}/issues/1"


@pytest.fixture
async def github(github_sandbox: GitHubSandbox, fake_time: FakeTime) -> GitHubClient:
    github_sandbox.use_clock(fake_time.clock)
    client = github_sandbox.client(clock=fake_time.clock, sleep=fake_time.sleep)
    await client.create_issue(SANDBOX_REPO, title="one", body="", labels=[])
    await client.identity()
    fake_time.sleeps.clear()
    return client


def sent(sandbox: GitHubSandbox, method: str, path: str) -> int:
    return sum(1 for ex in sandbox.sandbox.traffic if ex.method == method and ex.path == path)


async def test_5xx_is_retried_with_exponential_backoff(
    github_sandbox: GitHubSandbox, github: GitHubClient, fake_time: FakeTime
) -> None:
    github_sandbox.fail("server_error", path=ISSUE_PATH, times=2)
    assert (await github.get_issue(SANDBOX_REPO, 1)).title == "one"
    assert fake_time.sleeps == [1.0, 2.0]
    assert sent(github_sandbox, "GET", ISSUE_PATH) == 3


async def test_5xx_that_does_not_stop_fails_after_the_bounded_attempts(
    github_sandbox: GitHubSandbox, github: GitHubClient, fake_time: FakeTime
) -> None:
    github_sandbox.fail("server_error", path=ISSUE_PATH, times=50, status=503)
    with pytest.raises(GitHubUnavailable) as caught:
        await github.get_issue(SANDBOX_REPO, 1)
    assert caught.value.github_status == 503 and caught.value.status == 503
    assert fake_time.sleeps == [1.0, 2.0, 4.0, 8.0]
    assert sent(github_sandbox, "GET", ISSUE_PATH) == 5


async def test_secondary_rate_limit_waits_what_retry_after_says(
    github_sandbox: GitHubSandbox, github: GitHubClient, fake_time: FakeTime
) -> None:
    github_sandbox.fail("secondary_rate_limit", path=ISSUE_PATH, retry_after=7)
    assert (await github.get_issue(SANDBOX_REPO, 1)).number == 1
    assert fake_time.sleeps == [7.0]


async def test_exhausted_primary_limit_waits_until_the_reset(
    github_sandbox: GitHubSandbox, github: GitHubClient, fake_time: FakeTime
) -> None:
    github_sandbox.fail("primary_rate_limit", path=ISSUE_PATH, reset_in=30)
    await github.get_issue(SANDBOX_REPO, 1)
    [wait] = fake_time.sleeps
    assert 30.0 < wait <= 31.0  # until x-ratelimit-reset, plus the reset second


async def test_rate_limit_without_a_hint_waits_a_minute_then_exponentially_longer(
    github_sandbox: GitHubSandbox, github: GitHubClient, fake_time: FakeTime
) -> None:
    github_sandbox.fail("too_many_requests", path=ISSUE_PATH, times=3)
    await github.get_issue(SANDBOX_REPO, 1)
    assert fake_time.sleeps == [60.0, 120.0, 240.0]


async def test_a_rate_limit_wait_beyond_the_bound_fails_at_once(
    github_sandbox: GitHubSandbox, github: GitHubClient, fake_time: FakeTime
) -> None:
    github_sandbox.fail("primary_rate_limit", path=ISSUE_PATH, reset_in=3000)
    with pytest.raises(GitHubRateLimited) as caught:
        await github.get_issue(SANDBOX_REPO, 1)
    assert fake_time.sleeps == []
    assert caught.value.retry_at is not None
    assert caught.value.retry_at == pytest.approx(fake_time.now + 3001, abs=1)
    assert "rate limit" in caught.value.message


async def test_a_forbidden_that_is_no_rate_limit_fails_at_once(
    github_sandbox: GitHubSandbox, github: GitHubClient, fake_time: FakeTime
) -> None:
    github_sandbox.fail(
        "server_error",
        path=ISSUE_PATH,
        status=403,
        message="Resource not accessible by integration",
    )
    with pytest.raises(GitHubRejected) as caught:
        await github.get_issue(SANDBOX_REPO, 1)
    assert caught.value.message == "Resource not accessible by integration"
    assert fake_time.sleeps == [] and sent(github_sandbox, "GET", ISSUE_PATH) == 1


async def test_rate_limit_holds_back_the_installations_next_requests(
    github_sandbox: GitHubSandbox, github: GitHubClient, fake_time: FakeTime
) -> None:
    github_sandbox.fail("secondary_rate_limit", path=ISSUE_PATH, retry_after=45)
    await github.get_issue(SANDBOX_REPO, 1)
    blocked = await github.pacer.ledger.blocked_until(github_sandbox.installation_id)
    assert blocked == pytest.approx(fake_time.now, abs=0.01)


@pytest.mark.parametrize("kind", ["issue", "comment", "pull"])
async def test_a_create_that_failed_after_acting_is_not_made_twice(
    github_sandbox: GitHubSandbox, github: GitHubClient, fake_time: FakeTime, kind: str
) -> None:
    sandbox = github_sandbox.sandbox
    repo = sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.git_path is not None
    if kind == "pull":
        branch_with_commit(repo.git_path, "feature")
    path = {
        "issue": f"/repos/{SANDBOX_REPO}/issues",
        "comment": f"/repos/{SANDBOX_REPO}/issues/1/comments",
        "pull": f"/repos/{SANDBOX_REPO}/pulls",
    }[kind]
    github_sandbox.fail("server_error", method="POST", path=path, after_effect=True)
    before = sent(github_sandbox, "POST", path)
    if kind == "issue":
        issue = await github.create_issue(SANDBOX_REPO, title="Once", body="only", labels=[])
        assert [i.title for i in repo.issues.values()].count("Once") == 1
        assert repo.issues[issue.number].title == "Once"  # what the first POST made
    elif kind == "comment":
        comment = await github.create_comment(SANDBOX_REPO, 1, "once only")
        assert [c.body for c in repo.comments.values()] == ["once only"]
        assert comment.body == "once only"
    else:
        pull = await github.create_pull(
            SANDBOX_REPO, title="PR", head="feature", base="main", body=""
        )
        assert len(repo.pulls) == 1
        assert pull.head.ref == "feature"
    assert sent(github_sandbox, "POST", path) == before + 1 and fake_time.sleeps == [1.0]


async def test_a_create_that_failed_before_acting_is_sent_again(
    github_sandbox: GitHubSandbox, github: GitHubClient, fake_time: FakeTime
) -> None:
    path = f"/repos/{SANDBOX_REPO}/issues"
    github_sandbox.fail("server_error", method="POST", path=path)
    before = sent(github_sandbox, "POST", path)
    made = await github.create_issue(SANDBOX_REPO, title="Twice sent", body="", labels=[])
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.issues[made.number].title == "Twice sent"
    assert len(repo.issues) == 2 and sent(github_sandbox, "POST", path) == before + 2


async def test_a_revoked_installation_token_is_replaced_once(
    github_sandbox: GitHubSandbox, github: GitHubClient
) -> None:
    github_sandbox.sandbox.world.tokens.clear()  # GitHub revoked every token
    assert (await github.get_issue(SANDBOX_REPO, 1)).number == 1
    assert github_sandbox.sandbox.token_requests[github_sandbox.installation_id] == 2


async def test_network_failures_are_retried_then_reported(
    github_sandbox: GitHubSandbox, fake_time: FakeTime
) -> None:
    client = github_sandbox.client(  # a port nobody listens on
        base_url=f"http://127.0.0.1:{refused_port()}", clock=fake_time.clock, sleep=fake_time.sleep
    )
    with pytest.raises(GitHubUnavailable) as caught:
        await client.identity()
    assert "did not answer" in caught.value.message
    assert fake_time.sleeps == [1.0, 2.0, 4.0, 8.0]
