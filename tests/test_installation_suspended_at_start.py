"""A process that starts while an installation is suspended refuses it too. It never reads
the suspension from the removals stream (a new lookup reads from the stream's end:
tests/test_installation_suspend.py covers the processes running when it came), and GitHub
still names a suspended installation for its repositories (`GET /repos/{owner}/{repo}/
installation` answers 200, with `suspended_at` set). `GitHubClient._fetch_installation` once
ignored `suspended_at`, so such a process used the installation anyway. Real Redis and the
GitHub sandbox; no service."""

from __future__ import annotations

import pytest
import redis

from bot.github.errors import GitHubNotFound
from bot.github.installation_removals import InstallationRemovals
from tests.conftest import SANDBOX_APP_ID, GitHubSandbox


async def test_a_client_started_during_a_suspension_refuses_the_installation_until_lifted(
    github_sandbox: GitHubSandbox, redis_url: str
) -> None:
    sandbox = github_sandbox.sandbox
    repo = github_sandbox.repo
    installation = sandbox.world.installations[github_sandbox.installation_id]
    sandbox.suspend(installation)
    # Told to the processes running then (the handler of `installation.suspend`).
    told = redis.Redis.from_url(redis_url)
    InstallationRemovals(told, app_id=SANDBOX_APP_ID).removed(
        [repo], installation.id, suspended=True
    )
    told.close()
    # A process started since: its client shares the stream but has read none of it.
    client = github_sandbox.client(
        installation_removals=InstallationRemovals(
            redis.Redis.from_url(redis_url), app_id=SANDBOX_APP_ID
        )
    )
    with pytest.raises(GitHubNotFound, match="suspended"):
        await client.installation_id(repo)
    with pytest.raises(GitHubNotFound, match="suspended"):
        await client.scoped_token(repo, {"contents": "read"})
    sandbox.suspend(installation, suspended=False)  # lifted: the next lookup asks again
    assert await client.installation_id(repo) == installation.id
    assert await client.scoped_token(repo, {"contents": "read"})
