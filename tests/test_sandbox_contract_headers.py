"""The contract's checks of what `tests/test_sandbox_contract.py` leaves unchecked: an
answer's headers (GitHub documents `Location` on creates, `Link` on lists, the rate-limit
headers) and the status of a refusal. Each check is shown to bite, then every operation's
exchange passes them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.github.client import GitHubClient
from github_sandbox.contract import Contract
from github_sandbox.sandbox import Exchange
from tests.conftest import GITHUB_DATA, GitHubSandbox
from tests.test_sandbox_contract import REST_EXAMPLES
from tests.test_sandbox_contract import (
    test_every_described_operation_is_served_and_matches_the_description as walk_every_operation,
)

ISSUES = "/repos/{owner}/{repo}/issues"
ISSUE_URL = "https://api.github.com/repos/octocat/Hello-World/issues/1347"


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract.of(GITHUB_DATA)


def _issue() -> Any:
    return json.loads((REST_EXAMPLES / "issues__create/response-201-default.json").read_text())


def _exchange(method: str, route: str, status: int, **fields: Any) -> Exchange:
    values: dict[str, Any] = {"path": route, "query": {}, "request": None, "response": None}
    values.update(fields)
    return Exchange(method=method, route=route, status=status, **values)


def test_a_create_without_its_documented_location_is_a_failure(contract: Contract) -> None:
    issue = _issue()
    assert contract.header_problems("POST", ISSUES, 201, {"Location": ISSUE_URL}, issue) == []
    assert contract.header_problems("POST", ISSUES, 201, {}, issue) == [
        "201 of POST /repos/{owner}/{repo}/issues lacks its documented location header"
    ]
    elsewhere = {"location": "https://api.github.com/repos/octocat/Hello-World/issues/1"}
    assert contract.header_problems("POST", ISSUES, 201, elsewhere, issue) == [
        f"header location {elsewhere['location']} is not the resource {ISSUE_URL}"
    ]


def test_a_link_header_is_checked_where_documented_and_refused_elsewhere(
    contract: Contract,
) -> None:
    pages = "https://api.github.com/repositories/1/issues?page="
    link = f'<{pages}2>; rel="next", <{pages}5>; rel="last"'
    assert contract.header_problems("GET", ISSUES, 200, {"Link": link}) == []
    assert contract.header_problems("GET", ISSUES, 200, {}) == []  # one page: no Link
    assert contract.header_problems("GET", ISSUES, 200, {"Link": "page 2"}) == [
        "header link is not GitHub's form: page 2"
    ]
    route = "/repos/{owner}/{repo}/issues/{issue_number}"
    assert contract.header_problems("GET", route, 200, {"Link": link}) == [
        f"200 of GET {route} documents no Link header, got one"
    ]
    # A documented header with a value its schema rejects.
    limits = {"X-RateLimit-Limit": "many", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "2"}
    assert contract.header_problems("GET", "/rate_limit", 200, limits) == [
        "header x-ratelimit-limit: 'many' is not of type 'integer'"
    ]


def test_a_refusal_under_a_status_github_does_not_document_is_a_failure(
    contract: Contract,
) -> None:
    refused = {"message": "Validation Failed", "documentation_url": "x"}
    broken = {"title": ["not", "a", "title"]}
    located = {"Location": ISSUE_URL}
    fine = _exchange("POST", ISSUES, 422, request=broken, response=refused, headers=located)
    assert contract.exchange_problems(fine) == []
    teapot = _exchange("POST", ISSUES, 418, request=broken, response=refused)
    assert contract.exchange_problems(teapot) == [
        "POST /repos/{owner}/{repo}/issues -> 418 refusal: status 418 is not a documented answer"
    ]
    # A valid request answered without the documented Location fails too.
    created = _exchange("POST", ISSUES, 201, request={"title": "t"}, response=_issue())
    assert contract.exchange_problems(created) == [
        "POST /repos/{owner}/{repo}/issues -> 201 201 of POST /repos/{owner}/{repo}/issues "
        "lacks its documented location header"
    ]


def test_an_undocumented_422_passes_only_as_a_writes_refusal(contract: Contract) -> None:
    """GitHub refuses input it cannot take with 422 on any write, documented or not; a read
    never answers it, and a 422 must say why in one of GitHub's error shapes."""
    route = "/repos/{owner}/{repo}/check-runs"
    refused = {"message": "No commit found for SHA: main", "documentation_url": "x"}
    assert "422" not in contract.operation("POST", route)["responses"]
    assert contract.response_problems("POST", route, 422, refused) == []
    assert contract.response_problems("POST", route, 422, {"id": 1})  # not an error
    runs = "/repos/{owner}/{repo}/commits/{ref}/check-runs"
    assert contract.response_problems("GET", runs, 422, refused) == [
        f"status 422 is not a documented answer of GET {runs}"
    ]


async def test_every_operations_answer_has_the_headers_and_statuses_github_documents(
    github_sandbox: GitHubSandbox, github_client: GitHubClient
) -> None:
    await walk_every_operation(github_sandbox, github_client)
    contract = github_sandbox.contract
    problems = [
        problem
        for ex in github_sandbox.sandbox.traffic
        if not ex.injected
        for problem in contract.exchange_problems(ex)
    ]
    assert problems == [], "\n".join(problems)
