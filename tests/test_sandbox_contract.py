"""The sandbox checked against the real thing: GitHub's OpenAPI description for REST, and
octokit/webhooks' schemas and example payloads for webhooks. First the checks themselves
are shown to bite; then the sandbox's traffic passes them."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.github.client import GitHubClient
from bot.github.permissions import needed_permissions
from github_sandbox import registration
from github_sandbox.contract import Contract
from github_sandbox.permissions import OPERATIONS, READ, WRITE
from tests.conftest import GITHUB_DATA, SANDBOX_REPO, GitHubSandbox
from tests.fakes.git import branch_with_commit

REST_EXAMPLES = GITHUB_DATA / "rest-examples"
# The examples of the 21 operations the after-PR description adds (shared/github/README.md).
AFTER_PR_EXAMPLES = GITHUB_DATA / "after-pr" / "rest-examples"
# Known quirks of the description's own examples (shared/github/README.md), each with the
# exact problems the check must report for it: anything else in those files still fails.
TEAM_TYPE = "requested_teams/0: 'type' is a required property"
QUIRKS: dict[tuple[str, str], list[str]] = {
    ("pulls__create", "response-201-default.json"): [TEAM_TYPE],
    ("pulls__get", "response-200-default.json"): [TEAM_TYPE],
    ("pulls__list", "response-200-default.json"): [f"0/{TEAM_TYPE}"],
    ("pulls__update", "response-200-default.json"): [TEAM_TYPE],
    ("pulls__request-reviewers", "response-201-default.json"): [TEAM_TYPE],
    ("actions__list-jobs-for-workflow-run", "response-200-default.json"): [
        "jobs/0: 'created_at' is a required property"
    ],
    ("repos__get", "response-200-default-response.json"): [
        "source: 'language' is a required property",
        "<root>: 'language' is a required property",
    ],
    (
        "repos__get-collaborator-permission-level",
        "response-200-response-if-user-has-admin-permissions.json",
    ): ["user: 'role_name' is a required property"],
}
# Examples of another media type than the default application/json (README: the
# "github-object" directory example is `application/vnd.github.object`).
MEDIA_TYPES = {
    (
        "repos__get-content",
        "response-200-response-if-content-is-a-directory-github-object.json",
    ): "application/vnd.github.object",
}


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract.of(GITHUB_DATA)


def _operation(contract: Contract, folder: str) -> tuple[str, str]:
    wanted = folder.replace("__", "/")
    for route, methods in contract.openapi["paths"].items():
        for method, operation in methods.items():
            if operation.get("operationId") == wanted:
                return method.upper(), route
    raise AssertionError(f"no operation {wanted}")


EXAMPLE_FILES = sorted([*REST_EXAMPLES.glob("*/*.json"), *AFTER_PR_EXAMPLES.glob("*/*.json")])


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_githubs_own_rest_examples_pass_the_check(contract: Contract, path: Path) -> None:
    method, route = _operation(contract, path.parent.name)
    data = json.loads(path.read_text())
    if path.name.startswith("request"):
        assert contract.request_problems(method, route, data["body"]) == []
        return
    status = int(path.name.split("-")[1])
    key = (path.parent.name, path.name)
    media_type = MEDIA_TYPES.get(key, "application/json")
    problems = contract.response_problems(method, route, status, data, media_type)
    assert problems == QUIRKS.get(key, [])  # a quirk is seen exactly as the README names it
    if key in MEDIA_TYPES:  # ...and the object form is not the default array form
        assert contract.response_problems(method, route, status, data)


def test_the_rest_check_catches_a_missing_field_and_a_wrong_type(contract: Contract) -> None:
    issue = json.loads((REST_EXAMPLES / "issues__create/response-201-default.json").read_text())
    route = "/repos/{owner}/{repo}/issues"
    broken = copy.deepcopy(issue)
    del broken["number"]
    assert any(
        "'number' is a required property" in p
        for p in contract.response_problems("POST", route, 201, broken)
    )
    broken = copy.deepcopy(issue)
    broken["labels"] = "bug"
    assert contract.response_problems("POST", route, 201, broken)
    assert contract.request_problems("POST", route, {"title": ["not", "a", "title"]})
    assert contract.response_problems("POST", route, 299, issue)  # not a documented status


def test_an_operation_without_a_description_is_a_failure_not_a_pass(contract: Contract) -> None:
    issue = json.loads((REST_EXAMPLES / "issues__create/response-201-default.json").read_text())
    undescribed = "/repos/{owner}/{repo}/issues/{issue_number}/lock"
    for problems in (
        contract.response_problems("PUT", undescribed, 204, None),
        contract.request_problems("PUT", undescribed, {"lock_reason": "spam"}),
        contract.query_problems("PUT", undescribed, {}),
        # a described route with a method it does not describe
        contract.response_problems("DELETE", "/repos/{owner}/{repo}/issues", 200, issue),
    ):
        assert len(problems) == 1 and "not an operation GitHub's description has" in problems[0]


def test_query_parameters_are_checked_by_name_and_value(contract: Contract) -> None:
    route = "/repos/{owner}/{repo}/issues"
    fine = {"state": "all", "per_page": "100", "page": "2", "labels": "bug,ui"}
    assert contract.query_problems("GET", route, fine) == []
    assert contract.query_problems("GET", route, {"per_page": "10", "color": "red"}) == [
        "query parameter 'color' is not declared by GET /repos/{owner}/{repo}/issues"
    ]
    assert contract.query_problems("GET", route, {"state": "shut"})  # not in the enum
    assert contract.query_problems("GET", route, {"page": "x"})  # not an integer
    # an operation that declares no query parameters takes none
    assert contract.query_problems("GET", "/app", {"page": "1"})


def test_a_body_where_the_description_documents_none_is_a_failure(contract: Contract) -> None:
    route = "/repos/{owner}/{repo}/issues/comments/{comment_id}"
    assert contract.response_problems("DELETE", route, 204, None) == []
    assert contract.response_problems("DELETE", route, 204, {"deleted": True})
    assert contract.request_problems("GET", "/app", {"unexpected": 1})


@pytest.mark.parametrize(
    "path",
    sorted((GITHUB_DATA / "webhook-examples").rglob("*.json")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_every_real_webhook_example_passes_the_check(contract: Contract, path: Path) -> None:
    payload = json.loads(path.read_text())
    assert contract.webhook_problems(path.parent.name, payload) == []


def test_the_webhook_check_catches_extra_and_missing_keys(contract: Contract) -> None:
    opened = json.loads((GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_text())
    extra = copy.deepcopy(opened)
    extra["issue"]["invented"] = True
    assert contract.webhook_problems("issues", extra)
    missing = copy.deepcopy(opened)
    del missing["issue"]["user"]["node_id"]
    assert contract.webhook_problems("issues", missing)
    assert contract.shape_problems("issues", missing) == ["/issue/user/node_id"]


def test_a_schema_checked_before_still_reports_each_break(contract: Contract) -> None:
    """Each schema is compiled once per process and kept (Contract.of): a pass does not hide
    a later break of the same schema, a break does not stick to a later pass, and each
    action of an event keeps its own schema."""
    assert Contract.of(GITHUB_DATA / ".") is contract
    route = "/repos/{owner}/{repo}/issues"
    issue = json.loads((REST_EXAMPLES / "issues__create/response-201-default.json").read_text())
    broken = {**issue, "number": "seven"}
    webhooks = GITHUB_DATA / "webhook-examples/issues"
    labeled = json.loads((webhooks / "labeled.payload.json").read_text())
    opened = json.loads((webhooks / "opened.payload.json").read_text())
    extra = copy.deepcopy(opened)
    extra["issue"]["invented"] = True
    for _ in range(2):
        assert contract.response_problems("POST", route, 201, issue) == []
        assert contract.response_problems("POST", route, 201, broken) == [
            "number: 'seven' is not of type 'integer'"
        ]
        assert contract.request_problems("POST", route, {"title": "t"}) == []
        assert contract.webhook_problems("issues", opened) == []
        assert contract.webhook_problems("issues", extra) == [
            "issue: Additional properties are not allowed ('invented' was unexpected)"
        ]
        assert contract.webhook_problems("issues", labeled) == []
        assert contract.webhook_problems("issues", {**labeled, "action": "opened"}) == [
            "<root>: Additional properties are not allowed ('label' was unexpected)"
        ]


def _broken_copies(instance: Any) -> list[Any]:
    """The instance with its first key dropped, that key's value of another type and a key
    no schema names, then the same in its first object, and so on down; a list breaks
    through its first item."""
    if isinstance(instance, list):
        return [[item, *instance[1:]] for item in _broken_copies(instance[0])] if instance else []
    if not isinstance(instance, dict) or not instance:
        return [None] if instance is not None else ["text"]
    first = next(iter(instance))
    broken = [
        {key: value for key, value in instance.items() if key != first},
        {**instance, "invented_key": True},
        *({**instance, first: other} for other in _broken_copies(instance[first])[:1]),
    ]
    nested = next((key for key, value in instance.items() if isinstance(value, dict)), None)
    if nested is not None:
        broken += [{**instance, nested: inner} for inner in _broken_copies(instance[nested])]
    return broken


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_jsonschema_rs_and_jsonschema_agree_on_each_rest_example(
    contract: Contract, path: Path
) -> None:
    """jsonschema-rs's verdict stands when it passes an answer (CompiledSchema): it must
    fail what jsonschema fails, here on each example and broken copies of it."""
    method, route = _operation(contract, path.parent.name)
    operation = contract.operation(method, route)
    assert operation is not None
    data = json.loads(path.read_text())
    if path.name.startswith("request"):
        spec, instance = contract.resolve(operation["requestBody"]), data["body"]
    else:
        spec, instance = contract.resolve(operation["responses"][path.name.split("-")[1]]), data
    media_type = MEDIA_TYPES.get((path.parent.name, path.name), "application/json")
    compiled = contract.rest_schema(spec["content"][media_type]["schema"])
    for each in [instance, *_broken_copies(instance)]:
        fast, slow = compiled.verdicts(each)
        assert fast == slow, each


@pytest.mark.parametrize(
    "path",
    sorted((GITHUB_DATA / "webhook-examples").rglob("*.json")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_jsonschema_rs_and_jsonschema_agree_on_each_webhook_example(
    contract: Contract, path: Path
) -> None:
    payload = json.loads(path.read_text())
    action = payload.get("action")
    compiled = contract.webhook_schema(path.parent.name, action)
    assert compiled is not None
    for each in [payload, *_broken_copies(payload)]:
        fast, slow = compiled.verdicts(each)
        assert fast == slow, each


async def test_every_webhook_the_sandbox_sends_matches_githubs_schemas(
    github_sandbox: GitHubSandbox, github_client: GitHubClient, tmp_path: Path
) -> None:
    sandbox = github_sandbox.sandbox
    github_sandbox.deliver_to("http://127.0.0.1:9/nowhere")  # recorded, delivery fails
    inst = sandbox.install("octo-org", account_type="Organization")
    sandbox.add_repo("octo-org/widgets", installation=inst)
    issue = await github_client.create_issue(SANDBOX_REPO, title="t", body="b", labels=["one"])
    number = issue.number
    await github_client.add_labels(SANDBOX_REPO, number, ["two"])
    await github_client.remove_label(SANDBOX_REPO, number, "one")
    await github_client.update_issue(SANDBOX_REPO, number, title="t2", body="b2")
    await github_client.update_issue(SANDBOX_REPO, number, state="closed")
    await github_client.update_issue(SANDBOX_REPO, number, state="open")
    comment = await github_client.create_comment(SANDBOX_REPO, number, "hello")
    await github_client.update_comment(SANDBOX_REPO, comment.id, "hello again")
    repo = sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.git_path is not None
    branch_with_commit(repo.git_path, "feature")
    pull = await github_client.create_pull(
        SANDBOX_REPO, title="PR", head="feature", base="main", body="Closes #1"
    )
    await github_client.add_labels(SANDBOX_REPO, pull.number, ["review"])
    for state in ("closed", "open"):  # closed without a merge, then reopened
        await github_client.request(
            "PATCH", SANDBOX_REPO, f"/pulls/{pull.number}", payload={"state": state}
        )
    outcome = sandbox.ops.close_pull(
        repo, sandbox.world.user("steelframe-dev"), pull.number, merge=True
    )
    sandbox.emit(outcome.hooks)
    await github_sandbox.settle()
    kinds = {(d.event, d.action) for d in sandbox.hooks.sent}
    assert kinds == {
        ("ping", None),
        ("installation", "created"),
        ("installation_repositories", "added"),
        ("issues", "opened"),
        ("issues", "labeled"),
        ("issues", "unlabeled"),
        ("issues", "edited"),
        ("issues", "closed"),
        ("issues", "reopened"),
        ("issue_comment", "created"),
        ("issue_comment", "edited"),
        ("pull_request", "opened"),
        ("pull_request", "labeled"),
        ("pull_request", "closed"),
        ("pull_request", "reopened"),
    }
    assert github_sandbox.contract_problems() == []
    *_, merged, fixed = sandbox.hooks.sent
    closed = merged.payload
    assert closed["pull_request"]["merged"] is True and closed["number"] == pull.number
    # "Closes #1" in the merged pull request's body closed issue #1 after it, as GitHub does.
    assert (fixed.event, fixed.action, fixed.payload["issue"]["number"]) == ("issues", "closed", 1)
    assert fixed.payload["issue"]["state_reason"] == "completed"


async def test_every_described_operation_is_served_and_matches_the_description(
    github_sandbox: GitHubSandbox, github_client: GitHubClient
) -> None:
    """One call of each of the description's operations (the teardown checks every answer);
    the set served must be the set described."""
    repo = SANDBOX_REPO
    issue = await github_client.create_issue(repo, title="t", body="b", labels=["a"])
    number = issue.number
    await github_client.get_issue(repo, number)
    await github_client.update_issue(repo, number, title="t2")
    await github_client.list_issues(repo)
    await github_client.add_labels(repo, number, ["b"])
    await github_client.remove_label(repo, number, "a")
    await github_client.remove_label(repo, number, "a")  # the 404 answer
    await github_client.request("GET", repo, f"/issues/{number}/labels")
    await github_client.request("GET", repo, "/labels")
    await github_client.request("POST", repo, "/labels", payload={"name": "c", "color": "00ff00"})
    comment = await github_client.create_comment(repo, number, "c")
    await github_client.update_comment(repo, comment.id, "c2")
    await github_client.list_comments(repo, number)
    await github_client.request("GET", repo, f"/issues/comments/{comment.id}")
    await github_client.request("GET", repo, f"/issues/{number}/timeline")
    await github_client.request("DELETE", repo, f"/issues/comments/{comment.id}")
    await github_client.collaborator_permission(repo, "steelframe-dev")
    await github_client.request("GET", repo, "")
    await github_client.request("GET", repo, "/contents/README.md")
    await github_client.request("GET", repo, "/contents/", params={"ref": "main"})
    world = github_sandbox.sandbox.world
    sandbox_repo = world.repo(repo)
    assert sandbox_repo is not None and sandbox_repo.git_path is not None
    branch_with_commit(sandbox_repo.git_path, "feature")
    pull = await github_client.create_pull(repo, title="p", head="feature", base="main", body="")
    await github_client.get_pull(repo, pull.number)
    await github_client.list_pulls(repo)
    await github_client.request("PATCH", repo, f"/pulls/{pull.number}", payload={"body": "x"})
    await _after_the_pull_request(github_sandbox, github_client, pull.number)
    await github_client.identity()  # GET /app; the installation and token calls came first
    token = await github_client.installation_token(repo)
    auth = {"Authorization": f"token {token}"}
    async with aiohttp.ClientSession(github_sandbox.url, headers=auth) as session:
        async with session.get("/installation/repositories") as response:
            assert response.status == 200
            assert [r["full_name"] for r in (await response.json())["repositories"]] == [repo]
        async with session.get("/rate_limit") as response:
            assert (await response.json())["resources"]["core"]["used"] >= 1
    code = registration.manifest_code(github_sandbox.sandbox, {"url": "http://localhost"})
    async with aiohttp.ClientSession(github_sandbox.url) as session:
        async with session.post(f"/app-manifests/{code}/conversions") as response:
            assert response.status == 201 and "PRIVATE KEY" in (await response.json())["pem"]
    described = {
        (method.upper(), route)
        for route, methods in github_sandbox.contract.openapi["paths"].items()
        for method in methods
    }
    served = {(ex.method, ex.route) for ex in github_sandbox.sandbox.traffic}
    assert len(described) == 49
    assert described == served
    assert github_sandbox.contract_problems() == []


async def _after_the_pull_request(
    github_sandbox: GitHubSandbox, github_client: GitHubClient, number: int
) -> None:
    """One call of each operation the after-PR description adds: a person reviews with
    their token, the App reacts, replies, reads CI and merges."""
    repo = SANDBOX_REPO
    person = {"Authorization": f"token {github_sandbox.user_token('rita', 'write')}"}
    pull = await github_client.get_pull(repo, number)
    sha = pull.head.sha
    base = f"{github_sandbox.url}/repos/{repo}"
    async with aiohttp.ClientSession(headers=person) as session:
        files = await github_client.list_pull_files(repo, number)
        path = next(f.filename for f in files if f.status == "added")
        async with session.post(
            f"{base}/pulls/{number}/reviews",
            json={
                "event": "COMMENT",
                "body": "b",
                "comments": [{"path": path, "line": 1, "body": "c"}],
            },
        ) as response:
            review = await response.json()
            assert response.status == 200, review
        async with session.post(
            f"{base}/pulls/{number}/comments",
            json={"body": "d", "commit_id": sha, "path": path, "line": 1},
        ) as response:
            single = await response.json()
            assert response.status == 201, single
        async with session.post(
            f"{base}/pulls/{number}/comments/{single['id']}/replies", json={"body": "e"}
        ) as response:
            assert response.status == 201
        issue_comment = await github_client.create_comment(repo, number, "f")
    await github_client.list_reviews(repo, number)
    await github_client.list_comments_for_review(repo, number, review["id"])
    await github_client.list_review_comments(repo, number)
    await github_client.reply_to_review_comment(repo, number, single["id"], "g")
    await github_client.react_to_review_comment(repo, single["id"])
    await github_client.react_to_issue_comment(repo, issue_comment.id)
    token = await github_client.installation_token(repo)
    async with aiohttp.ClientSession(headers={"Authorization": f"token {token}"}) as session:
        async with session.post(
            f"{base}/check-runs", json={"name": "lint", "head_sha": sha}
        ) as response:
            check = await response.json()
        async with session.patch(
            f"{base}/check-runs/{check['id']}", json={"conclusion": "success"}
        ) as response:
            assert response.status == 200
    await github_client.get_check_run(repo, check["id"])
    await github_client.list_check_run_annotations(repo, check["id"])
    await github_client.list_check_runs_for_ref(repo, sha)
    await github_client.combined_status(repo, sha)
    control = f"{github_sandbox.url}/_sandbox/repos/{repo}/commits/{sha}/checks"
    async with aiohttp.ClientSession() as session:
        async with session.post(
            control, json={"log": "boom"}, headers=github_sandbox.control_headers
        ) as response:
            failed = await response.json()
    await github_client.get_workflow_run(repo, failed["workflow_run_id"])
    jobs = await github_client.list_jobs(repo, failed["workflow_run_id"])
    assert (await github_client.download_job_log(repo, jobs[0].id)).text == "boom"
    github_sandbox.sandbox.grant(repo, "octo-reviewer", "read")
    await github_client.request_reviewers(repo, number, ["octo-reviewer"])
    assert (await github_client.merge_pull(repo, number, sha=sha)).merged


def test_each_repository_operation_asks_the_permission_github_names(contract: Contract) -> None:
    """The sandbox's permission table has one row per described repository operation, with
    GitHub's operation id and its word on installation tokens (`enabledForGitHubApps`), and
    the client asks for a token with exactly that permission."""
    repo_prefix = "/repos/{owner}/{repo}"
    described = {}
    for route, methods in contract.openapi["paths"].items():
        for method, operation in methods.items():
            # The App's own JWT call: no installation token is involved.
            if route.startswith(repo_prefix) and operation["operationId"] != (
                "apps/get-repo-installation"
            ):
                described[(method.upper(), route)] = operation
    assert set(OPERATIONS) == set(described)
    examples = {"{path}": "README.md", "{name}": "bug", "{username}": "octocat", "{ref}": "main"}
    for (method, route), operation in described.items():
        need = OPERATIONS[(method, route)]
        assert need.operation_id == operation["operationId"]
        assert need.installation_tokens == operation["x-github"]["enabledForGitHubApps"]
        path = route.removeprefix(repo_prefix)
        for placeholder, value in examples.items():
            path = path.replace(placeholder, value)
        path = re.sub(r"\{[a-z_]+\}", "7", path)
        level = "read" if need.level == READ else "write"
        assert needed_permissions(method, path) == {need.permission: level}, (method, route)
        assert need.permission == _permission_of(operation["x-github"], route), route
        assert need.level == (READ if method == "GET" else WRITE), route


# GitHub's description files each operation under a category; the fine-grained permission
# follows it, with the exceptions GitHub's permissions page names.
CATEGORY_PERMISSIONS = {
    "issues": "issues",
    "pulls": "pull_requests",
    "checks": "checks",
    "actions": "actions",
    "commits": "statuses",
    "collaborators": "metadata",
}
PERMISSION_EXCEPTIONS = {"/repos/{owner}/{repo}/pulls/{pull_number}/merge": "contents"}


def _permission_of(x_github: dict[str, str], route: str) -> str:
    if route in PERMISSION_EXCEPTIONS:
        return PERMISSION_EXCEPTIONS[route]
    category, subcategory = x_github["category"], x_github["subcategory"]
    if category == "reactions":  # a reaction belongs to what it reacts to
        return "issues" if "/issues/" in route else "pull_requests"
    if category == "repos":
        return "contents" if subcategory == "contents" else "metadata"
    return CATEGORY_PERMISSIONS[category]


def test_a_refusal_must_be_one_of_githubs_error_shapes(contract: Contract) -> None:
    """What the fixture asks of an answer to a request the schema rejects."""
    assert contract.error_problems({"message": "Not Found", "documentation_url": "x"}) == []
    simple = {"message": "Unprocessable Entity", "documentation_url": "x", "errors": ["why"]}
    assert contract.error_problems(simple) == []
    assert contract.error_problems({"id": 1, "state": "open"})
    assert contract.error_problems(None)
