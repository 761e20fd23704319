"""Installation tokens scoped to one repository and the least permissions a step needs:
the client asks for them (`repositories`, `permissions`), the sandbox checks the request
as GitHub does and enforces what the token may reach."""

from __future__ import annotations

import asyncio

import pytest

from bot.github.pacing import PacingPolicy
from tests.conftest import SANDBOX_REPO, FakeTime, GitHubSandbox
from tests.fakes.git import branch_with_commit
from tests.test_sandbox_auth import app_jwt, call


async def test_a_scoped_token_reaches_only_its_repository_and_permissions(
    github_sandbox: GitHubSandbox,
) -> None:
    installation = github_sandbox.sandbox.world.installations[github_sandbox.installation_id]
    github_sandbox.sandbox.add_repo("steelframe-dev/other", installation=installation, notify=False)
    client = github_sandbox.client()
    token = await client.scoped_token(SANDBOX_REPO, {"contents": "read"})
    auth = f"token {token}"
    status, _ = await call(github_sandbox, "GET", f"/repos/{SANDBOX_REPO}", auth)
    assert status == 200
    status, _ = await call(github_sandbox, "GET", "/repos/steelframe-dev/other", auth)
    assert status == 404  # the installation's other repository is out of its reach
    status, body = await call(
        github_sandbox, "POST", f"/repos/{SANDBOX_REPO}/issues", auth, json={"title": "x"}
    )
    assert status == 403 and body["message"] == "Resource not accessible by integration"
    status, _ = await call(github_sandbox, "GET", f"/repos/{SANDBOX_REPO}/issues", auth)
    assert status == 403  # contents only: no issues at all
    issued = github_sandbox.sandbox.world.tokens[token]
    assert issued.repos == frozenset({SANDBOX_REPO}) and issued.permissions == {
        "metadata": "read",
        "contents": "read",
    }


@pytest.mark.parametrize(
    ("body", "status"),
    [
        # (Requests that break the schema itself are refused too; the contract check at
        # teardown forbids sending them, so only well-formed but excessive ones are here.)
        ({"repositories": ["not-installed"]}, 422),
        ({"permissions": {"administration": "write"}}, 422),  # never granted to the App
        ({"permissions": {"metadata": "write"}}, 422),  # above what was granted
    ],
)
async def test_a_token_request_beyond_the_installation_is_refused(
    github_sandbox: GitHubSandbox, body: object, status: int
) -> None:
    path = f"/app/installations/{github_sandbox.installation_id}/access_tokens"
    before = dict(github_sandbox.sandbox.world.tokens)
    got, answer = await call(
        github_sandbox, "POST", path, f"Bearer {app_jwt(github_sandbox.private_key)}", json=body
    )
    assert got == status and "message" in answer
    assert github_sandbox.sandbox.world.tokens == before  # no token was issued


# What each call needs, as GitHub's "Permissions required for GitHub Apps" lists it
# (every token also carries metadata: read). Written out here, not taken from the client,
# so a client that asks for more (or for less) fails.
LEAST = {
    ("GET", "/repos/{owner}/{repo}"): {},
    ("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission"): {},
    ("GET", "/repos/{owner}/{repo}/issues"): {"issues": "read"},
    ("POST", "/repos/{owner}/{repo}/issues"): {"issues": "write"},
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}"): {"issues": "read"},
    ("PATCH", "/repos/{owner}/{repo}/issues/{issue_number}"): {"issues": "write"},
    ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels"): {"issues": "write"},
    ("DELETE", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}"): {"issues": "write"},
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments"): {"issues": "read"},
    ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments"): {"issues": "write"},
    ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}"): {"issues": "write"},
    ("GET", "/repos/{owner}/{repo}/pulls"): {"pull_requests": "read"},
    ("POST", "/repos/{owner}/{repo}/pulls"): {"pull_requests": "write"},
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}"): {"pull_requests": "read"},
    # CI on a pull request's head, read as a run delivers (bot.lifecycle.ci_intake.recheck).
    ("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs"): {"checks": "read"},
    ("GET", "/repos/{owner}/{repo}/commits/{ref}/status"): {"statuses": "read"},
}


def scope_problems(sandbox: GitHubSandbox, repo: str) -> list[str]:
    """Every request the sandbox served with an installation token that was not limited to
    `repo` alone and to exactly the permission its call needs (an empty list: all were)."""
    problems = []
    for ex in sandbox.sandbox.traffic:
        used = ex.credential
        if used is None or used.kind != "installation":
            continue
        where = f"{ex.method} {ex.path}"
        if used.repos != frozenset({repo.lower()}):
            problems.append(f"{where}: token for {sorted(used.repos or ['every repository'])}")
        least = LEAST.get((ex.method, ex.route))
        if least is None:
            problems.append(f"{where}: a call this test does not know")
        elif used.permissions != tuple(sorted({"metadata": "read", **least}.items())):
            problems.append(f"{where}: token with {used.permissions or 'all permissions'}")
    return problems


async def test_every_call_carries_a_token_for_its_repository_and_the_least_it_needs(
    github_sandbox: GitHubSandbox,
) -> None:
    client = github_sandbox.client()
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None
    branch_with_commit(repo.git_path, "feature")
    await client.get_repo(SANDBOX_REPO)
    issue = await client.create_issue(SANDBOX_REPO, title="t", body="b", labels=["x"])
    number = issue.number
    await client.get_issue(SANDBOX_REPO, number)
    await client.list_issues(SANDBOX_REPO)
    await client.update_issue(SANDBOX_REPO, number, title="t2")
    await client.add_labels(SANDBOX_REPO, number, ["y"])
    assert await client.remove_label(SANDBOX_REPO, number, "x")
    comment = await client.create_comment(SANDBOX_REPO, number, "hello")
    await client.update_comment(SANDBOX_REPO, comment.id, "hello again")
    await client.list_comments(SANDBOX_REPO, number)
    pull = await client.create_pull(SANDBOX_REPO, title="p", head="feature", base="main", body="")
    await client.get_pull(SANDBOX_REPO, pull.number)
    await client.list_pulls(SANDBOX_REPO, head="feature")
    await client.collaborator_permission(SANDBOX_REPO, "someone")
    assert scope_problems(github_sandbox, SANDBOX_REPO) == []
    asked = [
        ex.request
        for ex in github_sandbox.sandbox.traffic
        if ex.route == "/app/installations/{installation_id}/access_tokens"
    ]
    # One token per permission set, each asked for this repository alone and then reused.
    assert all(body["repositories"] == [SANDBOX_REPO.split("/")[1]] for body in asked)
    kinds = [tuple(sorted(body["permissions"].items())) for body in asked]
    assert len(kinds) == len(set(kinds)) == 5  # metadata, issues r/w, pull_requests r/w


async def test_a_call_outside_a_token_scope_is_refused_as_github_refuses_it(
    github_sandbox: GitHubSandbox,
) -> None:
    installation = github_sandbox.sandbox.world.installations[github_sandbox.installation_id]
    github_sandbox.sandbox.add_repo("steelframe-dev/other", installation=installation, notify=False)
    client = github_sandbox.client()
    auth = f"token {await client.scoped_token(SANDBOX_REPO, {'issues': 'write'})}"
    refused = {"message": "Resource not accessible by integration"}
    pulls = f"/repos/{SANDBOX_REPO}/pulls"
    for method, path, body in [
        ("POST", pulls, {"title": "p", "head": "main", "base": "main"}),
        ("GET", pulls, None),
        ("GET", f"/repos/{SANDBOX_REPO}/contents/README.md", None),
    ]:
        status, answer = await call(github_sandbox, method, path, auth, json=body)
        assert (status, answer["message"]) == (403, refused["message"]), (method, path)
    status, _ = await call(
        github_sandbox, "POST", "/repos/steelframe-dev/other/issues", auth, json={"title": "x"}
    )
    assert status == 404  # another repository of the same installation: out of its reach
    status, listed = await call(github_sandbox, "GET", "/installation/repositories", auth)
    assert status == 200 and [r["full_name"] for r in listed["repositories"]] == [SANDBOX_REPO]
    reader = f"token {await client.scoped_token(SANDBOX_REPO, {'contents': 'read'})}"
    status, _ = await call(
        github_sandbox, "GET", f"/repos/{SANDBOX_REPO}/contents/README.md", reader
    )
    assert status == 200
    # A call the client knows no least permission for is not sent with a broader token.
    with pytest.raises(ValueError, match="no permission known for POST /hooks"):
        await client.request("POST", SANDBOX_REPO, "/hooks", payload={})


async def test_an_installations_tokens_share_its_pacing_and_rate_budget(
    github_sandbox: GitHubSandbox, fake_time: FakeTime
) -> None:
    github_sandbox.use_clock(fake_time.clock)
    client = github_sandbox.client(
        clock=fake_time.clock, sleep=fake_time.sleep, pacing=PacingPolicy(min_interval=1.0)
    )
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None
    branch_with_commit(repo.git_path, "feature")
    issue = await client.create_issue(SANDBOX_REPO, title="t", body="b", labels=[])
    fake_time.sleeps.clear()
    # A comment (issues: write) and a pull request (pull_requests: write) right after the
    # issue: other tokens, one installation, so one lane of writes spaced by the interval
    # (with a lane per token the pull request would not have waited at all).
    await asyncio.gather(
        client.create_comment(SANDBOX_REPO, issue.number, "one"),
        client.create_pull(SANDBOX_REPO, title="p", head="feature", base="main", body=""),
    )
    assert sorted(fake_time.sleeps) == pytest.approx([1.0, 1.0])
    budgets = []
    for permissions in ({"issues": "read"}, {"pull_requests": "read"}):
        auth = f"token {await client.scoped_token(SANDBOX_REPO, permissions)}"
        status, body = await call(github_sandbox, "GET", "/rate_limit", auth)
        assert status == 200
        budgets.append(body["resources"]["core"]["used"])
    assert budgets[0] == budgets[1] >= 3  # GitHub counts an installation's tokens together


async def test_ci_and_merge_calls_need_the_permission_github_names(
    github_sandbox: GitHubSandbox,
) -> None:
    """Check runs need `checks`, the combined status `statuses`, runs and logs `actions`,
    and a merge `contents: write` (not `pull_requests`), as `permissions.py` says."""
    client = github_sandbox.client()
    base = f"/repos/{SANDBOX_REPO}"
    calls = [
        ("GET", f"{base}/commits/main/check-runs", "checks"),
        ("GET", f"{base}/commits/main/status", "statuses"),
        ("GET", f"{base}/actions/runs/1", "actions"),
        ("PUT", f"{base}/pulls/1/merge", "contents"),
    ]
    pulls_writer = f"token {await client.scoped_token(SANDBOX_REPO, {'pull_requests': 'write'})}"
    for method, path, _ in calls:
        status, answer = await call(github_sandbox, method, path, pulls_writer)
        assert (status, answer["message"]) == (403, "Resource not accessible by integration")
    answers = []
    for method, path, permission in calls[:3]:
        auth = f"token {await client.scoped_token(SANDBOX_REPO, {permission: 'read'})}"
        answers.append((await call(github_sandbox, method, path, auth))[0])
    assert answers == [200, 200, 404]  # let in (there is no workflow run 1)
