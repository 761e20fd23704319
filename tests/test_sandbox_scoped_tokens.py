"""Installation tokens scoped to one repository and the least permissions a step needs:
the client asks for them (`repositories`, `permissions`), the sandbox checks the request
as GitHub does and enforces what the token may reach."""

from __future__ import annotations

import pytest

from tests.conftest import SANDBOX_REPO, GitHubSandbox
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
