"""The whole loop offline: the App acts on the sandbox, the sandbox sends signed webhooks to
the real service, the service stores, processes, remembers and files text in memory."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.github.client import GitHubClient
from bot.github.errors import GitHubNotFound
from bot.github.installations import GitHubInstallation, GitHubRepository, stored_installations
from bot.lifecycle.context import github_factory
from memory import Memory
from memory.models import MemoryChunk
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox
from tests.fakes.patience import PATIENCE_SECONDS
from webhooks.deliveries import DeliveryStatus, WebhookDelivery
from webhooks.deps import WEBHOOKS


async def settle(sandbox: GitHubSandbox, api: ApiClient) -> list[WebhookDelivery]:
    await sandbox.settle()
    await asyncio.wait_for(api.raw.app[WEBHOOKS].processor.drain(), PATIENCE_SECONDS)
    return api.services.db.call(
        lambda s: list(s.scalars(select(WebhookDelivery).order_by(WebhookDelivery.received_at)))
    )


def live_chunks(api: ApiClient) -> dict[str, str]:
    return api.services.db.call(
        lambda s: {
            c.key: c.text for c in s.scalars(select(MemoryChunk).where(MemoryChunk.live.is_(True)))
        }
    )


async def test_an_issue_the_app_files_comes_back_as_stored_processed_deliveries(
    github_sandbox: GitHubSandbox, github_service: ApiClient
) -> None:
    github = github_service.services.github
    assert isinstance(github, GitHubClient)
    issue = await github.create_issue(
        SANDBOX_REPO, title="Flaky test", body="It fails on Tuesdays.", labels=["bug"]
    )
    stored = await settle(github_sandbox, github_service)
    by_event = [(d.event, d.action) for d in stored]
    assert by_event == [("ping", None), ("issues", "opened"), ("issues", "labeled")]
    assert all(d.status == DeliveryStatus.PROCESSED for d in stored)
    sent = {d.id for d in github_sandbox.sandbox.hooks.sent}
    assert {d.delivery_id for d in stored} == sent
    opened = stored[1]
    assert opened.repo == SANDBOX_REPO and opened.installation_id == github_sandbox.installation_id
    chunks = live_chunks(github_service)
    assert chunks[f"issue:{SANDBOX_REPO}#{issue.number}"].startswith("#1 Flaky test")
    repo = github_service.services.db.call(
        lambda s: s.scalar(
            select(GitHubRepository).where(GitHubRepository.full_name == SANDBOX_REPO)
        )
    )
    assert repo is not None and repo.installation_id == github_sandbox.installation_id


async def test_comment_edits_replace_the_remembered_text(
    github_sandbox: GitHubSandbox, github_service: ApiClient
) -> None:
    github = github_service.services.github
    assert github is not None
    issue = await github.create_issue(SANDBOX_REPO, title="t", body="b", labels=[])
    token = github_sandbox.user_token("alice", "write")
    async with github_service.raw.session.post(
        f"{github_sandbox.url}/repos/{SANDBOX_REPO}/issues/{issue.number}/comments",
        json={"body": "Use the staging database."},
        headers={"Authorization": f"token {token}"},
    ) as response:
        comment = await response.json()
    await github.update_comment(SANDBOX_REPO, comment["id"], "Use the production database.")
    stored = await settle(github_sandbox, github_service)
    assert [(d.event, d.action) for d in stored][-2:] == [
        ("issue_comment", "created"),
        ("issue_comment", "edited"),
    ]
    text = live_chunks(github_service)[f"comment:{comment['id']}"]
    assert text == f"@alice on #{issue.number}:\nUse the production database."


async def test_a_deleted_comment_is_forgotten_and_answers_no_search(
    github_sandbox: GitHubSandbox, github_service: ApiClient, tmp_path: Path
) -> None:
    github = github_service.services.github
    assert github is not None
    issue = await github.create_issue(SANDBOX_REPO, title="t", body="b", labels=[])
    token = github_sandbox.user_token("alice", "write")
    headers = {"Authorization": f"token {token}"}
    comments = f"{github_sandbox.url}/repos/{SANDBOX_REPO}/issues"
    async with github_service.raw.session.post(
        f"{comments}/{issue.number}/comments",
        json={"body": "The vault passphrase is tangerine-omnibus."},
        headers=headers,
    ) as response:
        comment = await response.json()
    await settle(github_sandbox, github_service)
    key = f"comment:{comment['id']}"
    memory = Memory(tmp_path / "reader", github_service.services.db.session)  # Chat's reader
    memory.sync()
    assert [h.record.text for h in memory.search("tangerine omnibus", repo=SANDBOX_REPO)] == [
        f"@alice on #{issue.number}:\nThe vault passphrase is tangerine-omnibus."
    ]
    async with github_service.raw.session.delete(
        f"{comments}/comments/{comment['id']}", headers=headers
    ) as response:
        assert response.status == 204
    stored = await settle(github_sandbox, github_service)
    assert (stored[-1].event, stored[-1].action) == ("issue_comment", "deleted")
    assert stored[-1].status == DeliveryStatus.PROCESSED
    assert key not in live_chunks(github_service)
    memory.sync()
    assert memory.search("tangerine omnibus", repo=SANDBOX_REPO) == []
    texts = github_service.services.db.call(
        lambda s: list(s.scalars(select(MemoryChunk.text).where(MemoryChunk.key == key)))
    )
    assert not any("tangerine" in text for text in texts)


async def test_installing_the_app_is_remembered(
    github_sandbox: GitHubSandbox, github_service: ApiClient
) -> None:
    sandbox = github_sandbox.sandbox
    installation = sandbox.install("octo-org", account_type="Organization")
    sandbox.add_repo("octo-org/widgets", installation=installation)
    await settle(github_sandbox, github_service)
    db = github_service.services.db
    row = db.call(lambda s: s.get(GitHubInstallation, installation.id))
    assert row is not None and row.account_login == "octo-org" and row.removed_at is None
    repo = db.call(
        lambda s: s.scalar(
            select(GitHubRepository).where(GitHubRepository.full_name == "octo-org/widgets")
        )
    )
    assert repo is not None and repo.installation_id == installation.id
    github = github_service.services.github
    assert github is not None
    # The webhook told the client which installation serves the repository: no lookup.
    assert await github.installations.get("octo-org/widgets") == installation.id
    assert not [ex for ex in sandbox.traffic if ex.route.endswith("/installation")]


async def test_a_redelivery_from_github_is_acknowledged_not_processed_again(
    github_sandbox: GitHubSandbox, github_service: ApiClient
) -> None:
    github = github_service.services.github
    assert github is not None
    await github.create_issue(SANDBOX_REPO, title="t", body="b", labels=[])
    stored = await settle(github_sandbox, github_service)
    opened = next(d for d in github_sandbox.sandbox.hooks.sent if d.event == "issues")
    github_sandbox.sandbox.hooks.redeliver(opened.id)
    again = await settle(github_sandbox, github_service)
    assert opened.status == 200 and opened.attempts == 2
    row = next(d for d in again if d.delivery_id == opened.id)
    assert row.attempts == 1 and len(again) == len(stored)


async def test_without_redis_only_a_pickup_label_is_warned_about(
    github_sandbox: GitHubSandbox, github_service: ApiClient, caplog: Any
) -> None:
    github = github_service.services.github
    assert github is not None and github_service.services.lifecycle is None  # no Redis here
    with caplog.at_level(logging.WARNING, logger="steelframe.webhooks"):
        await github.create_issue(SANDBOX_REPO, title="plain", body="b", labels=["bug"])
        await settle(github_sandbox, github_service)
        assert not [r for r in caplog.records if "pickup label" in r.getMessage()]
        await github.create_issue(
            SANDBOX_REPO, title="work", body="b", labels=["steelframe:work-on-this"]
        )
        await settle(github_sandbox, github_service)
    warned = [r.getMessage() for r in caplog.records if "pickup label" in r.getMessage()]
    assert warned  # the pickup label arrived and was dropped: say so
    assert all("no Redis for the lifecycle" in line for line in warned)


async def test_a_fresh_client_finds_the_installation_the_webhooks_stored(
    github_sandbox: GitHubSandbox, github_service: ApiClient
) -> None:
    """A new process (empty caches) asks the database before GitHub; a stored answer that
    GitHub contradicts is not asked again."""
    sandbox = github_sandbox.sandbox
    installation = sandbox.install("octo-org", account_type="Organization")
    sandbox.add_repo("octo-org/widgets", installation=installation)
    await settle(github_sandbox, github_service)
    db = github_service.services.db
    fresh = github_sandbox.client(stored_installation=stored_installations(db))
    await fresh.create_issue("octo-org/widgets", title="t", body="b", labels=[])
    lookups = [ex for ex in sandbox.traffic if ex.route.endswith("/installation")]
    assert lookups == []  # the stored answer served; no API round trip
    # Its `issues.opened` webhook stores the installation again: let that land first, or it
    # would overwrite the stale answer below.
    await settle(github_sandbox, github_service)

    def stale(session: Any) -> None:
        row = session.scalar(
            select(GitHubRepository).where(GitHubRepository.full_name == "octo-org/widgets")
        )
        row.installation_id = 999_999_999  # an installation GitHub does not know

    db.call(stale)
    restarted = github_sandbox.client(stored_installation=stored_installations(db))
    with pytest.raises(GitHubNotFound):
        await restarted.installation_token("octo-org/widgets")
    assert await restarted.installation_token("octo-org/widgets")  # asked GitHub this time
    lookups = [ex for ex in sandbox.traffic if ex.route.endswith("/installation")]
    assert len(lookups) == 1 and lookups[0].status == 200


async def test_a_workers_job_client_finds_the_installation_the_webhooks_stored(
    github_sandbox: GitHubSandbox, github_service: ApiClient, tmp_path: Path
) -> None:
    """Each lifecycle job makes a fresh client (no cache): it asks the database first."""
    sandbox = github_sandbox.sandbox
    installation = sandbox.install("octo-org", account_type="Organization")
    sandbox.add_repo("octo-org/widgets", installation=installation)
    await settle(github_sandbox, github_service)
    factory = github_factory(github_sandbox.settings(tmp_path), github_service.services.db)
    assert factory is not None
    async with factory() as github:
        await github.create_issue("octo-org/widgets", title="t", body="b", labels=[])
    assert not [ex for ex in sandbox.traffic if ex.route.endswith("/installation")]
