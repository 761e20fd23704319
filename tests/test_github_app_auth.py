"""App JWTs, installation token caching and refresh, installation lookup, and secrets that
never show up in reprs, errors or logs."""

from __future__ import annotations

import asyncio
import logging

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from bot.config_values import ConfigError, Secret
from bot.github.app_auth import AppCredentials, InstallationLookup, InstallationToken
from bot.github.app_records import AccessToken
from bot.github.client import GitHubClient
from bot.github.records import record
from tests.conftest import SANDBOX_APP_ID, SANDBOX_REPO, FakeTime, GitHubSandbox


def test_app_jwt_claims_follow_githubs_rules(github_app_keys: tuple[str, str]) -> None:
    private, public = github_app_keys
    now = 1_700_000_000.7
    token = AppCredentials(SANDBOX_APP_ID, Secret(private), clock=lambda: now).jwt()
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    claims = jwt.decode(token, public, algorithms=["RS256"], options={"verify_exp": False})
    assert claims == {
        "iss": str(SANDBOX_APP_ID),
        "iat": 1_700_000_000 - 60,
        "exp": 1_700_000_000 + 540,
    }
    assert claims["exp"] - claims["iat"] == 600  # GitHub's ten-minute maximum
    assert claims["exp"] - now <= 600


def test_app_jwt_is_reused_until_shortly_before_it_expires(
    github_app_keys: tuple[str, str], fake_time: FakeTime
) -> None:
    app = AppCredentials(SANDBOX_APP_ID, Secret(github_app_keys[0]), clock=fake_time.clock)
    first = app.jwt()
    fake_time.now += 400
    assert app.jwt() == first
    fake_time.now += 100  # 60 s before exp: sign a new one
    assert app.jwt() != first


def test_a_key_that_is_not_a_pem_names_no_key_material() -> None:
    with pytest.raises(ConfigError) as caught:
        AppCredentials(1, Secret("-----BEGIN RSA PRIVATE KEY-----\nsecretstuff\n"), clock=lambda: 0)
    assert "secretstuff" not in str(caught.value) and "PRIVATE_KEY" in str(caught.value)


def test_the_key_is_parsed_once_and_a_bad_one_refused_every_time(
    github_app_keys: tuple[str, str],
) -> None:
    """Every GitHub client builds its credentials from the PEM; parsing one costs ~40 ms."""
    first = AppCredentials(SANDBOX_APP_ID, Secret(github_app_keys[0]), clock=lambda: 0)
    second = AppCredentials(SANDBOX_APP_ID, Secret(github_app_keys[0]), clock=lambda: 0)
    assert first._key is second._key
    for _ in range(2):
        with pytest.raises(ConfigError, match="not a PEM"):
            AppCredentials(1, Secret("-----BEGIN RSA PRIVATE KEY-----\nx\n"), clock=lambda: 0)


def test_a_key_that_is_not_rsa_is_refused() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    with pytest.raises(ConfigError, match="RSA"):
        AppCredentials(1, Secret(pem), clock=lambda: 0)


def test_reprs_hide_the_key(github_app_keys: tuple[str, str]) -> None:
    private = github_app_keys[0]
    client = GitHubClient(app_id=7, private_key=Secret(private))
    body = private.splitlines()[1]
    assert body not in repr(client) and body not in repr(client.app)


def test_a_token_answer_shows_no_token() -> None:
    answer = record(AccessToken, {"token": "ghs_s3cret", "expires_at": "2030-01-01T00:00:00Z"})
    token = InstallationToken.from_github(answer)
    assert token.token.reveal() == "ghs_s3cret" and token.expires_at == 1893456000.0
    for shown in (repr(answer), str(answer), repr(token)):
        assert "ghs_s3cret" not in shown


async def test_installation_token_is_fetched_once_for_concurrent_callers(
    github_sandbox: GitHubSandbox, github_client: GitHubClient
) -> None:
    tokens = await asyncio.gather(
        *[github_client.installation_token(SANDBOX_REPO) for _ in range(10)]
    )
    assert len(set(tokens)) == 1
    assert github_sandbox.sandbox.token_requests == {github_sandbox.installation_id: 1}
    lookups = [ex for ex in github_sandbox.sandbox.traffic if ex.route.endswith("/installation")]
    assert len(lookups) == 1


async def test_installation_token_is_refreshed_before_it_expires(
    github_sandbox: GitHubSandbox, fake_time: FakeTime
) -> None:
    github_sandbox.use_clock(fake_time.clock)
    client = github_sandbox.client(clock=fake_time.clock, sleep=fake_time.sleep)
    first = await client.installation_token(SANDBOX_REPO)
    fake_time.now += 3600 - 301  # the sandbox's tokens live an hour, like GitHub's
    assert await client.installation_token(SANDBOX_REPO) == first
    fake_time.now += 2  # inside the 5-minute refresh margin
    second = await client.installation_token(SANDBOX_REPO)
    assert second != first
    assert github_sandbox.sandbox.token_requests[github_sandbox.installation_id] == 2
    made = await client.create_issue(SANDBOX_REPO, title="with the new token", body="", labels=[])
    assert made.number == 1


async def test_installation_lookup_is_cached_and_refreshed_after_its_ttl(
    github_sandbox: GitHubSandbox, fake_time: FakeTime
) -> None:
    github_sandbox.use_clock(fake_time.clock)
    client = github_sandbox.client(clock=fake_time.clock, sleep=fake_time.sleep)
    assert await client.installation_id(SANDBOX_REPO) == github_sandbox.installation_id
    assert await client.installation_id(SANDBOX_REPO.upper()) == github_sandbox.installation_id
    fake_time.now += 3601
    await client.installation_id(SANDBOX_REPO)
    lookups = [ex for ex in github_sandbox.sandbox.traffic if ex.route.endswith("/installation")]
    assert len(lookups) == 2


async def test_logs_never_carry_the_key_or_tokens(
    github_sandbox: GitHubSandbox,
    github_client: GitHubClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    github_sandbox.fail("server_error", path="/repos/*/issues/*", times=1)
    issue = await github_client.create_issue(SANDBOX_REPO, title="t", body="b", labels=["x"])
    await github_client.get_issue(SANDBOX_REPO, issue.number)
    token = await github_client.installation_token(SANDBOX_REPO)
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert "retry 1" in text  # the logs did say something
    assert token not in text
    assert github_sandbox.private_key.splitlines()[1] not in text
    assert github_client.app.jwt() not in text


async def test_the_installation_lookup_asks_the_store_then_github() -> None:
    asked: list[str] = []
    stored: dict[str, int] = {"o/kept": 7}

    async def fetch(repo: str) -> int:
        asked.append(repo)
        return 42

    async def durable(repo: str) -> int | None:
        if repo == "o/broken":
            raise OSError("database down")
        return stored.get(repo)

    lookup = InstallationLookup(fetch, clock=lambda: 1000.0, durable=durable)
    assert await lookup.get("o/kept") == 7 and asked == []
    assert await lookup.get("o/unknown") == 42 and asked == ["o/unknown"]
    assert await lookup.get("o/broken") == 42  # a store that fails is only a missed shortcut
    lookup.invalidate("o/kept")  # GitHub refused installation 7 for it
    assert await lookup.get("o/kept") == 42 and asked[-1] == "o/kept"
