"""`steelframe github check`, `webhooks list` and `webhooks replay`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.clock import utcnow
from bot.db import Database, upgrade
from steelframe.cli import main
from tests.conftest import SANDBOX_REPO, GitHubSandbox, store_deliveries
from webhooks.deliveries import DeliveryStatus, NewDelivery, WebhookDelivery


def seed(url: str) -> None:
    db = Database.from_url(url)
    upgrade(db.engine)
    now = utcnow()
    asyncio.run(
        store_deliveries(
            db,
            [
                NewDelivery("ok-1", "issues", "opened", 1, "a/b", "{}", now),
                NewDelivery("bad-1", "issue_comment", "created", 1, "a/b", "{}", now),
                NewDelivery("bad-2", "issue_comment", "created", 1, "a/b", "{}", now),
                NewDelivery("again-1", "issues", "labeled", 1, "a/b", "{}", now),
            ],
        )
    )

    def finish(session: Any) -> None:
        outcomes = {
            "ok-1": (DeliveryStatus.PROCESSED, None),
            "bad-1": (DeliveryStatus.DEAD, "gave up after 8 attempts: KeyError: 'x'"),
            "bad-2": (DeliveryStatus.DEAD, "not retryable: BadRequest: no"),
            "again-1": (DeliveryStatus.RETRYING, "GitHubUnavailable: 502"),
        }
        for row in session.scalars(select(WebhookDelivery)):
            row.status, row.reason = outcomes[row.delivery_id]
            row.attempts = 1
            if row.status == DeliveryStatus.RETRYING:
                row.next_attempt_at = now

    db.call(finish)
    db.dispose()


def statuses(url: str) -> dict[str, str]:
    db = Database.from_url(url)
    try:
        return db.call(
            lambda s: {d.delivery_id: d.status for d in s.scalars(select(WebhookDelivery))}
        )
    finally:
        db.dispose()


@pytest.fixture
def database_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", url)
    monkeypatch.chdir(tmp_path)
    seed(url)
    return url


def test_webhooks_list_shows_the_log_and_the_failed_ones(
    database_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["webhooks", "list"]) == 0
    out = capsys.readouterr().out
    assert "ok-1" in out and "issues.opened" in out and "processed" in out
    assert main(["webhooks", "list", "--failed"]) == 0
    out = capsys.readouterr().out
    assert "bad-1" in out and "gave up after 8 attempts: KeyError: 'x'" in out
    assert "again-1" in out and "retrying" in out and "next " in out
    assert "ok-1" not in out
    assert main(["webhooks", "list", "--status", "dead"]) == 0
    out = capsys.readouterr().out
    assert "bad-1" in out and "bad-2" in out and "again-1" not in out
    assert main(["webhooks", "list", "--status", "nonsense"]) == 2
    known = ", ".join(DeliveryStatus)
    assert (
        capsys.readouterr().err.strip() == f"steelframe: unknown status 'nonsense': one of {known}"
    )
    with pytest.raises(SystemExit):
        main(["webhooks", "list", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    assert all(f" {status}," in helped or f" {status} " in helped for status in DeliveryStatus)


def test_webhooks_list_with_nothing_to_show_says_which_database_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run from another folder than the checkout, the command reads that folder's ./var:
    an empty list printed nothing at all, as if no delivery had ever come."""
    monkeypatch.delenv("STEELFRAME_DATABASE_URL", raising=False)
    monkeypatch.delenv("STEELFRAME_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    database = f"sqlite:///{tmp_path / 'var' / 'steelframe.db'}"
    assert main(["webhooks", "list"]) == 0
    assert capsys.readouterr().out == f"no deliveries in {database}\n"
    assert main(["webhooks", "list", "--failed"]) == 0
    assert capsys.readouterr().out == f"no failed deliveries in {database}\n"
    assert main(["webhooks", "list", "--status", "dead"]) == 0
    assert capsys.readouterr().out == f"no dead deliveries in {database}\n"


def test_webhooks_replay_takes_ids(database_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["webhooks", "replay", "bad-1", "ok-1"]) == 0
    assert statuses(database_env) == {
        "ok-1": DeliveryStatus.RECEIVED,
        "bad-1": DeliveryStatus.RECEIVED,
        "bad-2": DeliveryStatus.DEAD,
        "again-1": DeliveryStatus.RETRYING,
    }
    assert main(["webhooks", "replay", "no-such-delivery"]) == 1
    assert "no delivery 'no-such-delivery'" in capsys.readouterr().err


def test_webhooks_replay_failed_takes_only_the_dead_ones(
    database_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["webhooks", "replay", "--failed"]) == 0
    assert "2 dead deliveries queued again" in capsys.readouterr().out
    assert statuses(database_env) == {
        "ok-1": DeliveryStatus.PROCESSED,
        "bad-1": DeliveryStatus.RECEIVED,
        "bad-2": DeliveryStatus.RECEIVED,
        "again-1": DeliveryStatus.RETRYING,
    }


def test_webhooks_replay_needs_ids_or_failed(
    database_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["webhooks", "replay"]) == 2
    assert main(["webhooks", "replay", "--failed", "bad-1"]) == 2
    assert "give delivery ids or --failed" in capsys.readouterr().err
    assert statuses(database_env)["bad-1"] == DeliveryStatus.DEAD


async def test_github_check_authenticates_against_the_sandbox(
    github_sandbox: GitHubSandbox,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APP_ID", str(github_sandbox.app_id))
    monkeypatch.setenv("PRIVATE_KEY", github_sandbox.private_key.replace("\n", "\\n"))
    monkeypatch.setenv("GITHUB_API_URL", github_sandbox.url)
    assert await asyncio.to_thread(main, ["github", "check", "--repo", SANDBOX_REPO]) == 0
    out = capsys.readouterr().out
    assert "steelframe-sandbox[bot]" in out and "installation token: ok" in out
    # A repository the App is not installed on: said so, with where to install it (GitHub
    # answers a bare 404 "Not Found", which read as if the App itself were missing).
    assert await asyncio.to_thread(main, ["github", "check", "--repo", "nobody/here"]) == 1
    err = capsys.readouterr().err
    assert "the App steelframe-sandbox is not installed on nobody/here" in err
    assert f"{github_sandbox.url}/apps/steelframe-sandbox/installations/new" in err


def test_github_check_without_an_app_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("APP_ID", "PRIVATE_KEY", "PRIVATE_KEY_PATH"):
        monkeypatch.delenv(name, raising=False)
    assert main(["github", "check"]) == 1
    assert "no GitHub App configured" in capsys.readouterr().err
