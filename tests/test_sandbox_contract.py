"""The sandbox checked against the real thing: GitHub's OpenAPI description for REST, and
octokit/webhooks' schemas and example payloads for webhooks. First the checks themselves
are shown to bite; then the sandbox's traffic passes them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bot.github.client import GitHubClient
from github_sandbox.contract import Contract
from tests.conftest import GITHUB_DATA, SANDBOX_REPO, GitHubSandbox
from tests.fakes.git import branch_with_commit

REST_EXAMPLES = GITHUB_DATA / "rest-examples"
# Known quirks of the description's own examples (shared/github/README.md).
QUIRKS = {
    ("pulls__create", "response-201-default.json"),  # requested_teams[0].type is missing
}


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract(GITHUB_DATA)


def _operation(contract: Contract, folder: str) -> tuple[str, str]:
    wanted = folder.replace("__", "/")
    for route, methods in contract.openapi["paths"].items():
        for method, operation in methods.items():
            if operation.get("operationId") == wanted:
                return method.upper(), route
    raise AssertionError(f"no operation {wanted}")


EXAMPLE_FILES = sorted(REST_EXAMPLES.glob("*/*.json"))


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_githubs_own_rest_examples_pass_the_check(contract: Contract, path: Path) -> None:
    method, route = _operation(contract, path.parent.name)
    data = json.loads(path.read_text())
    if path.name.startswith("request"):
        assert contract.request_problems(method, route, data["body"]) == []
        return
    status = int(path.name.split("-")[1])
    problems = contract.response_problems(method, route, status, data)
    if (path.parent.name, path.name) in QUIRKS:
        assert problems  # the check sees the quirk the README documents
    else:
        assert problems == []


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


async def test_every_webhook_the_sandbox_sends_matches_githubs_schemas(
    github_sandbox: GitHubSandbox, github_client: GitHubClient, tmp_path: Path
) -> None:
    sandbox = github_sandbox.sandbox
    github_sandbox.deliver_to("http://127.0.0.1:9/nowhere")  # recorded, delivery fails
    inst = sandbox.install("octo-org", account_type="Organization")
    sandbox.add_repo("octo-org/widgets", installation=inst)
    issue = await github_client.create_issue(SANDBOX_REPO, title="t", body="b", labels=["one"])
    number = issue["number"]
    await github_client.add_labels(SANDBOX_REPO, number, ["two"])
    await github_client.remove_label(SANDBOX_REPO, number, "one")
    await github_client.update_issue(SANDBOX_REPO, number, title="t2", body="b2")
    await github_client.update_issue(SANDBOX_REPO, number, state="closed")
    await github_client.update_issue(SANDBOX_REPO, number, state="open")
    comment = await github_client.create_comment(SANDBOX_REPO, number, "hello")
    await github_client.update_comment(SANDBOX_REPO, comment["id"], "hello again")
    repo = sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.git_path is not None
    branch_with_commit(repo.git_path, "feature")
    pull = await github_client.create_pull(
        SANDBOX_REPO, title="PR", head="feature", base="main", body="Closes #1"
    )
    await github_client.add_labels(SANDBOX_REPO, pull["number"], ["review"])
    outcome = sandbox.ops.close_pull(
        repo, sandbox.world.user("steelframe-dev"), pull["number"], merge=True
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
    }
    assert github_sandbox.contract_problems() == []
    closed = sandbox.hooks.sent[-1].payload
    assert closed["pull_request"]["merged"] is True and closed["number"] == pull["number"]


async def test_every_described_operation_is_served_and_matches_the_description(
    github_sandbox: GitHubSandbox, github_client: GitHubClient
) -> None:
    issue = await github_client.create_issue(SANDBOX_REPO, title="t", body="b", labels=["a"])
    await github_client.get_issue(SANDBOX_REPO, issue["number"])
    await github_client.add_labels(SANDBOX_REPO, issue["number"], ["b"])
    await github_client.remove_label(SANDBOX_REPO, issue["number"], "a")
    await github_client.remove_label(SANDBOX_REPO, issue["number"], "a")  # the 404 answer
    await github_client.create_comment(SANDBOX_REPO, issue["number"], "c")
    await github_client.list_comments(SANDBOX_REPO, issue["number"])
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.git_path is not None
    branch_with_commit(repo.git_path, "feature")
    await github_client.create_pull(SANDBOX_REPO, title="p", head="feature", base="main", body="")
    described = {
        (method.upper(), route)
        for route, methods in github_sandbox.contract.openapi["paths"].items()
        for method in methods
    }
    served = {(ex.method, ex.route) for ex in github_sandbox.sandbox.traffic}
    assert described <= served
    assert github_sandbox.contract_problems() == []
