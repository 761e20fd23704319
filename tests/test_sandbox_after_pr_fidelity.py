"""Where the sandbox answered what GitHub would not, after the pull request: each case is
GitHub's documented answer, so a client that passes here does not fail on GitHub. The
`github_sandbox` fixture's teardown checks every exchange against the description."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import aiohttp

from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.test_sandbox_after_pr import Person, deliveries
from tests.test_sandbox_after_pr import pull as pull  # the `pull` fixture
from tests.test_sandbox_after_pr import reviewer as reviewer  # the `reviewer` fixture


async def _app_call(
    github_sandbox: GitHubSandbox, method: str, path: str, body: Any
) -> tuple[int, Any]:
    token = await github_sandbox.client().installation_token(SANDBOX_REPO)
    async with aiohttp.ClientSession(headers={"Authorization": f"token {token}"}) as session:
        url = f"{github_sandbox.url}/repos/{SANDBOX_REPO}{path}"
        async with session.request(method, url, json=body) as response:
            return response.status, await response.json()


async def test_a_check_run_needs_a_commit_sha_not_a_branch_name(
    github_sandbox: GitHubSandbox, pull: dict[str, Any]
) -> None:
    """GitHub's `head_sha` is "the SHA of the commit": a branch name is 422 "No commit found
    for SHA", where the sandbox resolved it (a client passing a ref would pass here only)."""
    for ref in ("steelframe/notes", "main", "HEAD"):
        status, body = await _app_call(
            github_sandbox, "POST", "/check-runs", {"name": "lint", "head_sha": ref}
        )
        assert (status, body["message"]) == (422, f"No commit found for SHA: {ref}")
    status, body = await _app_call(
        github_sandbox, "POST", "/check-runs", {"name": "lint", "head_sha": pull["sha"]}
    )
    assert status == 201 and body["head_sha"] == pull["sha"]
    await github_sandbox.settle()
    assert [d["action"] for d in deliveries(github_sandbox, "check_run")] == ["created"]


async def test_a_person_has_one_pending_review_per_pull_request(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    """GitHub: "User can only have one pending review per pull request" (422); the sandbox
    kept a second."""
    number = pull["number"]
    first = await reviewer.call("POST", f"/pulls/{number}/reviews", {"body": "draft"}, status=200)
    assert first["state"] == "PENDING"
    refused = await reviewer.call(
        "POST", f"/pulls/{number}/reviews", {"body": "another"}, status=422
    )
    assert refused["errors"] == ["User can only have one pending review per pull request"]
    listed = await reviewer.call("GET", f"/pulls/{number}/reviews", status=200)
    assert [r["id"] for r in listed] == [first["id"]]


async def test_since_lists_only_what_was_updated_at_or_after_it(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    """`since` is declared on the review comment, issue comment and issue lists; the
    sandbox ignored it and answered everything (a client's incremental read looked right
    here and nowhere else)."""
    now = [time.time()]
    github_sandbox.use_clock(lambda: now[0])
    number = pull["number"]
    spot = {"commit_id": pull["sha"], "path": "notes.md", "line": 1}
    await reviewer.call("POST", f"/pulls/{number}/comments", {**spot, "body": "old"}, status=201)
    await reviewer.call("POST", f"/issues/{number}/comments", {"body": "old"}, status=201)
    now[0] += 5
    since = datetime.fromtimestamp(now[0], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await reviewer.call("POST", f"/pulls/{number}/comments", {**spot, "body": "new"}, status=201)
    await reviewer.call("POST", f"/issues/{number}/comments", {"body": "new"}, status=201)
    for path in (f"/pulls/{number}/comments", f"/issues/{number}/comments"):
        everything = await reviewer.call("GET", path, status=200)
        assert [c["body"] for c in everything] == ["old", "new"]
        recent = await reviewer.call("GET", f"{path}?since={since}", status=200)
        assert [c["body"] for c in recent] == ["new"], path
    # The pull request's issue was updated by the new comment; a later `since` names none.
    issues = await reviewer.call("GET", f"/issues?state=all&since={since}", status=200)
    assert [i["number"] for i in issues] == [number]
    later = datetime.fromtimestamp(now[0] + 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert await reviewer.call("GET", f"/issues?state=all&since={later}", status=200) == []
