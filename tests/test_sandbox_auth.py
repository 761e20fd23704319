"""The sandbox checks credentials as GitHub does: App JWTs against the App's public key,
installation tokens on every call, and people's tokens for tests that play a human."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import jwt
import pytest

from github_sandbox import generate_app_keys
from tests.conftest import SANDBOX_APP_ID, SANDBOX_REPO, GitHubSandbox


async def call(
    sandbox: GitHubSandbox, method: str, path: str, auth: str | None, **kwargs: Any
) -> tuple[int, Any]:
    headers = {"Authorization": auth} if auth else {}
    async with aiohttp.ClientSession() as session:
        async with session.request(method, sandbox.url + path, headers=headers, **kwargs) as r:
            return r.status, await r.json()


def app_jwt(private_key: str, **claims: Any) -> str:
    now = int(time.time())
    payload = {"iat": now - 60, "exp": now + 540, "iss": str(SANDBOX_APP_ID), **claims}
    return jwt.encode(payload, private_key, algorithm="RS256")


async def test_a_good_app_jwt_reads_the_app(github_sandbox: GitHubSandbox) -> None:
    status, body = await call(
        github_sandbox, "GET", "/app", f"Bearer {app_jwt(github_sandbox.private_key)}"
    )
    assert status == 200 and body["slug"] == "steelframe-sandbox"


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        # Times in seconds from when the test runs: collection can be many minutes earlier.
        ({"exp": -5}, "'Expiration time' claim ('exp') must be"),
        ({"exp": 3600}, "too far in the future"),
        ({"iat": 600}, "'Issued at' claim"),
        ({"iss": "999"}, "'Issuer' claim"),
    ],
    ids=["expired", "too-long", "future-iat", "other-app"],
)
async def test_bad_app_jwts_are_refused(
    github_sandbox: GitHubSandbox, claims: dict[str, Any], message: str
) -> None:
    now = int(time.time())
    claims = {k: now + v if k in ("iat", "exp") else v for k, v in claims.items()}
    token = app_jwt(github_sandbox.private_key, **claims)
    status, body = await call(github_sandbox, "GET", "/app", f"Bearer {token}")
    assert status == 401 and message in body["message"]


async def test_a_jwt_signed_with_another_key_is_refused(github_sandbox: GitHubSandbox) -> None:
    other_private, _ = generate_app_keys()
    status, body = await call(github_sandbox, "GET", "/app", f"Bearer {app_jwt(other_private)}")
    assert status == 401 and body["message"] == "A JSON web token could not be decoded"


async def test_app_endpoints_refuse_installation_tokens(github_sandbox: GitHubSandbox) -> None:
    token = await github_sandbox.client().installation_token(SANDBOX_REPO)
    status, _ = await call(github_sandbox, "GET", "/app", f"token {token}")
    assert status == 401


@pytest.mark.parametrize("auth", [None, "token nope", "Basic abc", "token "])
async def test_repository_calls_need_a_valid_token(
    github_sandbox: GitHubSandbox, auth: str | None
) -> None:
    status, body = await call(github_sandbox, "GET", f"/repos/{SANDBOX_REPO}/issues", auth)
    assert status == 401 and body["message"] in ("Bad credentials", "Requires authentication")


async def test_an_expired_installation_token_is_refused(github_sandbox: GitHubSandbox) -> None:
    token = await github_sandbox.client().installation_token(SANDBOX_REPO)
    github_sandbox.sandbox.world.tokens[token].expires_at = time.time() - 1
    status, body = await call(
        github_sandbox, "GET", f"/repos/{SANDBOX_REPO}/issues", f"token {token}"
    )
    assert status == 401 and body["message"] == "Bad credentials"


async def test_a_token_sees_only_its_installations_repositories(
    github_sandbox: GitHubSandbox,
) -> None:
    other = github_sandbox.sandbox.install("elsewhere", notify=False)
    github_sandbox.sandbox.add_repo(
        "elsewhere/private", installation=other, private=True, notify=False
    )
    token = await github_sandbox.client().installation_token(SANDBOX_REPO)
    status, body = await call(
        github_sandbox, "GET", "/repos/elsewhere/private/issues", f"token {token}"
    )
    assert status == 404 and body["message"] == "Not Found"


async def test_a_person_without_push_access_cannot_label(github_sandbox: GitHubSandbox) -> None:
    token = github_sandbox.user_token("passer-by")
    status, issue = await call(
        github_sandbox,
        "POST",
        f"/repos/{SANDBOX_REPO}/issues",
        f"token {token}",
        json={"title": "Please help", "labels": ["steelframe:work-on-this"]},
    )
    # GitHub drops labels silently for people without push access.
    assert status == 201 and issue["labels"] == [] and issue["user"]["login"] == "passer-by"
    assert issue["author_association"] == "NONE"
    status, body = await call(
        github_sandbox,
        "POST",
        f"/repos/{SANDBOX_REPO}/issues/{issue['number']}/labels",
        f"token {token}",
        json={"labels": ["x"]},
    )
    assert status == 403 and body["message"] == "Must have push access to repository"


async def test_a_collaborator_labels_and_the_webhook_names_them(
    github_sandbox: GitHubSandbox,
) -> None:
    token = github_sandbox.user_token("maintainer", "write")
    status, issue = await call(
        github_sandbox,
        "POST",
        f"/repos/{SANDBOX_REPO}/issues",
        f"token {token}",
        json={"title": "Pick me", "labels": ["steelframe:work-on-this"]},
    )
    assert status == 201 and [label["name"] for label in issue["labels"]] == [
        "steelframe:work-on-this"
    ]
    sent = github_sandbox.sandbox.hooks.sent
    assert [(d.event, d.action) for d in sent] == [("issues", "opened"), ("issues", "labeled")]
    assert {d.payload["sender"]["login"] for d in sent} == {"maintainer"}
    assert sent[1].payload["label"]["name"] == "steelframe:work-on-this"
