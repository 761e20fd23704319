"""GitHubClient against the local GitHub sandbox: every call the other parts use."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.errors import NotFound
from bot.github.client import GitHubClient
from bot.github.errors import GitHubNotFound, GitHubRejected
from bot.github.issue_records import Issue
from bot.lifecycle.worktree import git_env
from tests.conftest import SANDBOX_REPO, GitHubSandbox


async def test_create_issue_with_labels_and_get_it_back(github_client: GitHubClient) -> None:
    created = await github_client.create_issue(
        SANDBOX_REPO,
        title="Fix the README",
        body="It has a typo.",
        labels=["steelframe:work-on-this"],
    )
    fetched = await github_client.get_issue(SANDBOX_REPO, created.number)
    assert fetched.title == "Fix the README" and fetched.body == "It has a typo."
    assert fetched.label_names == ["steelframe:work-on-this"]
    assert fetched.author == "steelframe-sandbox[bot]" and not fetched.is_pull


async def test_add_and_remove_labels(github_client: GitHubClient) -> None:
    issue = await github_client.create_issue(SANDBOX_REPO, title="t", body="b", labels=[])
    labels = await github_client.add_labels(
        SANDBOX_REPO, issue.number, ["a b", "c:d", "area/ui", "50% ünï"]
    )
    assert [label.name for label in labels] == ["a b", "c:d", "area/ui", "50% ünï"]
    for name in ("area/ui", "50% ünï"):  # names that need careful URL encoding
        assert await github_client.remove_label(SANDBOX_REPO, issue.number, name) is True
    assert await github_client.remove_label(SANDBOX_REPO, issue.number, "c:d") is True
    assert await github_client.remove_label(SANDBOX_REPO, issue.number, "c:d") is False
    remaining = await github_client.get_issue(SANDBOX_REPO, issue.number)
    assert remaining.label_names == ["a b"]


async def test_remove_label_on_missing_issue_is_not_found(github_client: GitHubClient) -> None:
    with pytest.raises(GitHubNotFound) as caught:
        await github_client.remove_label(SANDBOX_REPO, 999, "x")
    assert caught.value.message == "Not Found" and isinstance(caught.value, NotFound)


async def test_missing_issue_is_not_found_with_githubs_message(github_client: GitHubClient) -> None:
    with pytest.raises(GitHubNotFound) as caught:
        await github_client.get_issue(SANDBOX_REPO, 424242)
    assert caught.value.status == 404 and caught.value.github_status == 404
    assert caught.value.message == "Not Found"


async def test_unfixable_4xx_fails_at_once_with_githubs_message(
    github_sandbox: GitHubSandbox, github_client: GitHubClient
) -> None:
    with pytest.raises(GitHubRejected) as caught:
        await github_client.create_issue(SANDBOX_REPO, title="   ", body="b", labels=[])
    assert caught.value.github_status == 422
    assert caught.value.message.startswith("Validation Failed")
    posts = [ex for ex in github_sandbox.sandbox.traffic if ex.route.endswith("/issues")]
    assert len(posts) == 1  # not retried


async def test_comments_create_update_and_list_all_pages(
    github_sandbox: GitHubSandbox, github_client: GitHubClient
) -> None:
    issue = await github_client.create_issue(SANDBOX_REPO, title="t", body="b", labels=[])
    first = await github_client.create_comment(SANDBOX_REPO, issue.number, "first")
    updated = await github_client.update_comment(SANDBOX_REPO, first.id, "first, edited")
    assert updated.id == first.id and updated.body == "first, edited"
    assert updated.author == "steelframe-sandbox[bot]" and updated.html_url
    # 230 more comments straight into the world, so listing needs three pages of 100.
    sandbox = github_sandbox.sandbox
    repo = sandbox.world.repo(SANDBOX_REPO)
    user = sandbox.world.user("alice")
    for n in range(230):
        sandbox.ops.create_comment(repo, user, issue.number, {"body": f"comment {n}"})
    listed = await github_client.list_comments(SANDBOX_REPO, issue.number)
    assert [c.body for c in listed] == ["first, edited"] + [f"comment {n}" for n in range(230)]
    pages = [ex for ex in sandbox.traffic if ex.method == "GET" and ex.route.endswith("/comments")]
    assert len(pages) == 3


async def test_list_issues_filters_by_label_and_state(github_client: GitHubClient) -> None:
    one = await github_client.create_issue(SANDBOX_REPO, title="one", body="", labels=["x"])
    await github_client.create_issue(SANDBOX_REPO, title="two", body="", labels=[])
    closing = await github_client.update_issue(SANDBOX_REPO, one.number, state="closed")
    assert closing.state == "closed"
    assert await github_client.list_issues(SANDBOX_REPO, labels=["x"]) == []
    closed = await github_client.list_issues(SANDBOX_REPO, state="closed", labels=["x"])
    assert [i.title for i in closed] == ["one"]


def _push_branch(clone_url: str, token: str, workdir: Path, branch: str) -> None:
    """Clone and push as the worker does (the token for the clone URL's origin only); run
    off the event loop: the sandbox answering git shares the test's loop."""
    env = git_env(token, clone_url)

    def git(*args: str) -> None:
        subprocess.run(["git", *args], check=True, env=env, timeout=60)

    git("clone", "-q", clone_url, str(workdir))
    git("-C", str(workdir), "checkout", "-q", "-b", branch)
    (workdir / "fix.txt").write_text("fixed\n")
    git("-C", str(workdir), "add", "fix.txt")
    git("-C", str(workdir), "commit", "-q", "-m", "fix")
    git("-C", str(workdir), "push", "-q", "origin", branch)


async def test_pull_request_from_a_pushed_branch(
    github_sandbox: GitHubSandbox, github_client: GitHubClient, tmp_path: Path
) -> None:
    repo = await github_client.get_repo(SANDBOX_REPO)
    assert repo.full_name == SANDBOX_REPO and repo.default_branch == "main"
    token = await github_client.scoped_token(SANDBOX_REPO, {"contents": "write"})
    await asyncio.to_thread(
        _push_branch, repo.clone_url, token, tmp_path / "work", "steelframe/issue-1"
    )
    pull = await github_client.create_pull(
        SANDBOX_REPO, title="Fix", head="steelframe/issue-1", base="main", body="Closes #1"
    )
    assert pull.head.ref == "steelframe/issue-1" and pull.base.ref == "main"
    assert pull.head.sha != pull.base.sha and pull.state == "open"
    assert pull.head.repo is not None and pull.head.repo.full_name == SANDBOX_REPO
    found = await github_client.list_pulls(SANDBOX_REPO, head="steelframe/issue-1")
    assert found == [await github_client.get_pull(SANDBOX_REPO, pull.number)]
    assert await github_client.list_pulls(SANDBOX_REPO, head="other") == []
    with pytest.raises(GitHubRejected) as caught:  # GitHub allows one open PR per head
        await github_client.create_pull(
            SANDBOX_REPO, title="Again", head="steelframe/issue-1", base="main", body=""
        )
    assert "already exists" in caught.value.message


async def test_pull_request_for_a_branch_never_pushed_is_rejected(
    github_client: GitHubClient,
) -> None:
    with pytest.raises(GitHubRejected) as caught:
        await github_client.create_pull(SANDBOX_REPO, title="x", head="nope", base="main", body="")
    assert caught.value.github_status == 422


async def test_collaborator_permission(
    github_sandbox: GitHubSandbox, github_client: GitHubClient
) -> None:
    github_sandbox.user_token("writer", "write")
    github_sandbox.user_token("maintainer", "maintain")
    github_sandbox.user_token("reader")
    assert await github_client.collaborator_permission(SANDBOX_REPO, "writer") == "write"
    assert await github_client.collaborator_permission(SANDBOX_REPO, "maintainer") == "write"
    assert await github_client.collaborator_permission(SANDBOX_REPO, "reader") == "read"
    assert await github_client.collaborator_permission(SANDBOX_REPO, "steelframe-dev") == "admin"
    assert await github_client.collaborator_permission(SANDBOX_REPO, "nobody-at-all") == "none"


async def test_identity_names_the_bot_user(github_client: GitHubClient) -> None:
    assert github_client.app_slug is None  # not loaded yet
    identity = await github_client.identity()
    assert identity.slug == "steelframe-sandbox"
    assert github_client.bot_login == "steelframe-sandbox[bot]"
    assert await github_client.is_app_login("Steelframe-Sandbox[bot]")
    assert not await github_client.is_app_login("steelframe-sandbox")


async def test_installation_token_clones_nothing_but_is_current(
    github_sandbox: GitHubSandbox, github_client: GitHubClient
) -> None:
    token = await github_client.installation_token(SANDBOX_REPO)
    assert len(token) > 40  # the sandbox issues longer-than-classic tokens on purpose
    assert token == await github_client.installation_token(SANDBOX_REPO)
    assert github_sandbox.sandbox.token_requests == {github_sandbox.installation_id: 1}


async def test_repo_without_the_app_is_not_found(
    github_sandbox: GitHubSandbox, github_client: GitHubClient
) -> None:
    github_sandbox.sandbox.add_repo("someone/else", notify=False)
    with pytest.raises(GitHubNotFound):
        await github_client.get_issue("someone/else", 1)


@pytest.mark.parametrize("bad", ["noslash", "a/b/c", "/x", "x/"])
async def test_malformed_repo_name_is_bad_request(github_client: GitHubClient, bad: str) -> None:
    from bot.errors import BadRequest

    with pytest.raises(BadRequest):
        await github_client.get_issue(bad, 1)


async def test_paginate_follows_next_links_on_the_api_itself(github_client: GitHubClient) -> None:
    for title in ("one", "two", "three"):
        await github_client.create_issue(SANDBOX_REPO, title=title, body="", labels=[])
    items = await github_client.paginate(SANDBOX_REPO, "/issues", Issue, params={"per_page": "1"})
    assert sorted(item.title for item in items) == ["one", "three", "two"]


async def test_paginate_never_sends_the_token_to_a_next_link_on_another_host(
    github_sandbox: GitHubSandbox, github_client: GitHubClient, aiohttp_server: Any
) -> None:
    seen: list[str | None] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.json_response([])

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", elsewhere)
    other = await aiohttp_server(app)
    for title in ("one", "two"):
        await github_client.create_issue(SANDBOX_REPO, title=title, body="", labels=[])
    # The API answers with a `Link: rel="next"` on another origin.
    github_sandbox.sandbox.base_url = str(other.make_url("")).rstrip("/")
    with pytest.raises(GitHubRejected, match="outside the API base URL"):
        await github_client.paginate(SANDBOX_REPO, "/issues", Issue, params={"per_page": "1"})
    assert seen == []
