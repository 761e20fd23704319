"""`steelframe github check`, `webhooks list` and `webhooks replay`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.clock import utcnow
from bot.db import Database, upgrade
from steelframe.cli import main
from tests.conftest import SANDBOX_REPO, GitHubSandbox, store_deliveries
from webhooks.deliveries import DeliveryStatus, Finished, NewDelivery, finish


def seed(url: str) -> None:
    db = Database.from_url(url)
    upgrade(db.engine)
    now = utcnow()
    delivered = [
        NewDelivery("ok-1", "issues", "opened", 1, "a/b", "{}", now),
        NewDelivery("bad-1", "issue_comment", "created", 1, "a/b", "{}", now),
    ]
    asyncio.run(store_deliveries(db, delivered))
    db.call(
        finish,
        [
            Finished("ok-1", DeliveryStatus.PROCESSED),
            Finished("bad-1", DeliveryStatus.FAILED, "KeyError: 'x'"),
        ],
        now=now,
    )
    db.dispose()


@pytest.fixture
def database_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", url)
    monkeypatch.chdir(tmp_path)
    seed(url)
    return url


def test_webhooks_list_shows_the_log_and_filters_by_status(
    database_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["webhooks", "list"]) == 0
    out = capsys.readouterr().out
    assert "ok-1" in out and "issues.opened" in out and "processed" in out
    assert main(["webhooks", "list", "--status", "failed"]) == 0
    out = capsys.readouterr().out
    assert "bad-1" in out and "KeyError: 'x'" in out and "ok-1" not in out
    assert main(["webhooks", "list", "--status", "nonsense"]) == 2


def test_webhooks_replay_requeues_a_failed_delivery(
    database_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["webhooks", "replay", "bad-1"]) == 0
    assert main(["webhooks", "list", "--status", "received"]) == 0
    assert "bad-1" in capsys.readouterr().out
    assert main(["webhooks", "replay", "no-such-delivery"]) == 1
    assert "no replayable delivery" in capsys.readouterr().err


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
    assert await asyncio.to_thread(main, ["github", "check", "--repo", "nobody/here"]) == 1
    assert "GitHub said: Not Found" in capsys.readouterr().err


def test_github_check_without_an_app_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("APP_ID", "PRIVATE_KEY", "PRIVATE_KEY_PATH"):
        monkeypatch.delenv(name, raising=False)
    assert main(["github", "check"]) == 1
    assert "no GitHub App configured" in capsys.readouterr().err
