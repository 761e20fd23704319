"""The sandbox's control API (seeding, faults, deliveries) and its GitHub-style paging."""

from __future__ import annotations

import base64
from typing import Any

import aiohttp
import pytest

from github_sandbox import registration
from github_sandbox.faults import SECONDARY_MESSAGE
from tests.conftest import SANDBOX_REPO, GitHubSandbox


async def request(
    sandbox: GitHubSandbox, method: str, path: str, **kwargs: Any
) -> tuple[int, Any, Any]:
    if path.startswith("/_sandbox/"):
        kwargs["headers"] = {**sandbox.control_headers, **kwargs.get("headers", {})}
    async with aiohttp.ClientSession() as session:
        async with session.request(method, sandbox.url + path, **kwargs) as response:
            return response.status, response.headers.copy(), await response.json()


async def test_list_issues_pages_with_link_headers(github_sandbox: GitHubSandbox) -> None:
    sandbox = github_sandbox.sandbox
    repo = sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None
    for n in range(5):
        sandbox.ops.create_issue(repo, sandbox.world.user("alice"), {"title": f"issue {n}"})
    token = github_sandbox.user_token("alice")
    auth = {"Authorization": f"token {token}"}
    path = f"/repos/{SANDBOX_REPO}/issues?per_page=2&direction=asc"
    status, headers, page = await request(github_sandbox, "GET", path, headers=auth)
    assert status == 200 and [i["title"] for i in page] == ["issue 0", "issue 1"]
    assert 'rel="next"' in headers["Link"] and 'rel="last"' in headers["Link"]
    assert "page=3" in headers["Link"].split(",")[1]  # last
    status, headers, page = await request(github_sandbox, "GET", path + "&page=3", headers=auth)
    assert [i["title"] for i in page] == ["issue 4"]
    assert 'rel="next"' not in headers["Link"] and 'rel="prev"' in headers["Link"]
    assert int(headers["x-ratelimit-remaining"]) < int(headers["x-ratelimit-limit"])
    status, _, body = await request(github_sandbox, "GET", path + "&page=x", headers=auth)
    assert status == 422 and body["errors"][0]["field"] == "page"
    # That query broke GitHub's contract on purpose: the check must see it (and nothing
    # else); the exchange then leaves the record the teardown checks.
    bad = sandbox.traffic.pop()
    contract = github_sandbox.contract
    assert contract.query_problems(bad.method, bad.route, bad.query) == [
        "query parameter page: 'x' is not of type 'integer'"
    ]
    assert contract.response_problems(bad.method, bad.route, bad.status, bad.response) == []


async def test_faults_are_injected_and_run_out(github_sandbox: GitHubSandbox) -> None:
    status, _, _ = await request(
        github_sandbox,
        "POST",
        "/_sandbox/faults",
        json={"kind": "secondary_rate_limit", "retry_after": 3, "path": "/app", "times": 1},
    )
    assert status == 201
    status, headers, body = await request(github_sandbox, "GET", "/app")
    assert status == 403 and headers["retry-after"] == "3" and body["message"] == SECONDARY_MESSAGE
    status, _, _ = await request(github_sandbox, "GET", "/app")
    assert status == 401  # the fault ran out; now the missing JWT is the problem


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/_sandbox/faults", {"kind": "meteor"}),
        ("/_sandbox/faults", {"kind": "server_error", "bogus": 1, "status": "x"}),
        ("/_sandbox/installations", {}),
        ("/_sandbox/users", {"login": ""}),
    ],
)
async def test_control_api_refuses_bad_input(
    github_sandbox: GitHubSandbox, path: str, body: dict[str, Any]
) -> None:
    status, _, answer = await request(github_sandbox, "POST", path, json=body)
    assert status in (400, 422) and answer["message"]
    assert github_sandbox.sandbox.faults.faults == []


async def test_control_api_refuses_non_json(github_sandbox: GitHubSandbox) -> None:
    status, _, answer = await request(github_sandbox, "POST", "/_sandbox/users", data=b"{oops")
    assert status == 400 and answer["message"] == "Problems parsing JSON"


async def test_install_grant_and_merge_through_the_control_api(
    github_sandbox: GitHubSandbox,
) -> None:
    status, _, installed = await request(
        github_sandbox,
        "POST",
        "/_sandbox/installations",
        json={"account": "acme", "repos": ["acme/rockets"]},
    )
    assert status == 201 and installed["repos"] == ["acme/rockets"]
    status, _, _ = await request(
        github_sandbox,
        "POST",
        "/_sandbox/repos/acme/rockets/collaborators",
        json={"login": "wile", "permission": "admin"},
    )
    assert status == 201
    client = github_sandbox.client()
    assert await client.collaborator_permission("acme/rockets", "wile") == "admin"
    status, _, state = await request(github_sandbox, "GET", "/_sandbox/state")
    assert state["repos"]["acme/rockets"]["clone_url"].startswith("file://")
    status, _, _ = await request(
        github_sandbox, "POST", "/_sandbox/repos/acme/nothing/pulls/1/merge", json={}
    )
    assert status == 404
    status, _, _ = await request(
        github_sandbox, "POST", "/_sandbox/deliveries/not-a-guid/redeliver", json={}
    )
    assert status == 404
    status, _, deliveries = await request(github_sandbox, "GET", "/_sandbox/deliveries")
    assert [(d["event"], d["action"]) for d in deliveries] == [
        ("installation", "created"),
        ("installation_repositories", "added"),
    ]
    assert {d["error"] for d in deliveries} == {"no webhook URL configured"}


async def test_contents_labels_comments_and_the_manifest_exchange_behave_as_githubs(
    github_sandbox: GitHubSandbox,
) -> None:
    sandbox = github_sandbox.sandbox
    repo = sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None
    owner = {"Authorization": f"token {github_sandbox.user_token('steelframe-dev')}"}
    base = f"/repos/{SANDBOX_REPO}"
    status, _, readme = await request(
        github_sandbox, "GET", base + "/contents/README.md", headers=owner
    )
    assert status == 200 and readme["type"] == "file"
    assert base64.b64decode(readme["content"]).decode().startswith(f"# {SANDBOX_REPO}")
    status, _, root = await request(
        github_sandbox, "GET", base + "/contents/?ref=main", headers=owner
    )
    assert status == 200 and [e["name"] for e in root] == ["README.md"]
    status, _, _ = await request(github_sandbox, "GET", base + "/contents/nope.md", headers=owner)
    assert status == 404
    label = {"name": "triage", "color": "ff0000"}
    status, _, made = await request(
        github_sandbox, "POST", base + "/labels", headers=owner, json=label
    )
    assert status == 201 and made["name"] == "triage"
    status, _, body = await request(
        github_sandbox, "POST", base + "/labels", headers=owner, json=label
    )
    assert status == 422 and body["errors"][0]["code"] == "already_exists"
    issue = sandbox.ops.create_issue(repo, sandbox.world.user("alice"), {"title": "t"}).body
    comment = sandbox.ops.create_comment(
        repo, sandbox.world.user("alice"), issue["number"], {"body": "c"}
    ).body
    stranger = {"Authorization": f"token {github_sandbox.user_token('mallory')}"}
    path = f"{base}/issues/comments/{comment['id']}"
    status, _, _ = await request(github_sandbox, "DELETE", path, headers=stranger)
    assert status == 403 and comment["id"] in repo.comments
    async with aiohttp.ClientSession() as session:
        async with session.delete(github_sandbox.url + path, headers=owner) as response:
            assert response.status == 204
    assert comment["id"] not in repo.comments
    status, _, _ = await request(github_sandbox, "GET", "/installation/repositories", headers=owner)
    assert status == 403  # a person's token is not an installation's
    code = registration.manifest_code(sandbox, {"url": "http://localhost", "name": "Mine"})
    status, _, app = await request(github_sandbox, "POST", f"/app-manifests/{code}/conversions")
    assert status == 201 and app["name"] == "Mine" and app["slug"] == "mine"
    assert app["id"] != github_sandbox.app_id  # a new App, as GitHub makes
    status, _, _ = await request(github_sandbox, "POST", f"/app-manifests/{code}/conversions")
    assert status == 404  # a code is good for one exchange


async def test_the_control_api_needs_the_start_secret_and_refuses_browsers(
    github_sandbox: GitHubSandbox,
) -> None:
    async with aiohttp.ClientSession() as session:
        for headers in ({}, {"X-Sandbox-Secret": "guessed"}):
            async with session.post(
                f"{github_sandbox.url}/_sandbox/users", json={"login": "mallory"}, headers=headers
            ) as answer:
                assert answer.status == 401
                assert "X-Sandbox-Secret" in (await answer.json())["message"]
        # A page the developer opens posts blind (no-cors): its Origin gives it away, even
        # with the secret (a page could never know it, but no browser is let in at all).
        browser = {"Origin": "https://evil.example", **github_sandbox.control_headers}
        async with session.post(
            f"{github_sandbox.url}/_sandbox/webhook",
            json={"url": "https://evil.example"},
            headers=browser,
        ) as answer:
            assert answer.status == 403
    assert github_sandbox.sandbox.world.users.get("mallory") is None
    assert github_sandbox.sandbox.hooks.url != "https://evil.example"
    # The same calls with the secret work: the guard is what refused them.
    status, _, user = await request(
        github_sandbox, "POST", "/_sandbox/users", json={"login": "ada"}
    )
    assert status == 201 and user["token"]


async def test_the_rate_limit_is_answered_to_anyone_as_githubs_is(
    github_sandbox: GitHubSandbox,
) -> None:
    """`GET /rate_limit` without credentials answered 500 (a budget never counted); GitHub
    answers 200 with the anonymous budget, and asking spends none of it."""
    status, headers, answer = await request(github_sandbox, "GET", "/rate_limit")
    assert status == 200, answer
    assert headers["x-ratelimit-used"] == "0" and "rate" in answer


@pytest.mark.parametrize(
    "path",
    [
        f"/_sandbox/repos/{SANDBOX_REPO}/pulls/one/merge",
        f"/_sandbox/repos/{SANDBOX_REPO}/pulls/1/reviews/first/dismissals",
        "/_sandbox/repos/nobody/nothing/pulls/1/merge",
    ],
)
async def test_a_control_path_naming_no_pull_request_is_a_404_not_a_crash(
    github_sandbox: GitHubSandbox, path: str
) -> None:
    status, _, body = await request(github_sandbox, "POST", path, json={"by": "octocat"})
    assert status == 404 and body["message"] == "Not Found"
