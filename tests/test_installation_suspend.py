"""A suspended installation serves no repository until it is unsuspended: the process that
handles `installation.suspend` tells every other process's installation cache to forget it
(it was told only of uninstalls and repositories removed), and after `unsuspend` their next
lookup finds it again. Real Redis, the GitHub sandbox and the service's webhook handler;
the "other processes" are lookups as their clients hold them, sharing that Redis."""

from __future__ import annotations

import pytest

from bot.github.errors import GitHubNotFound
from tests.fakes.installations import other_processes
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def test_a_suspended_installation_is_forgotten_everywhere_until_unsuspended(
    make: Make,
) -> None:
    lc = await make()
    sandbox = lc.sandbox.sandbox
    installation = sandbox.world.installations[lc.sandbox.installation_id]
    with other_processes(lc) as others:
        for lookup in others:
            assert await lookup.get(lc.repo) == installation.id
        sandbox.suspend(installation)
        await lc.settle()  # this process's handler of `installation.suspend`
        for lookup in others:
            with pytest.raises(GitHubNotFound):  # asked again: not served while suspended
                await lookup.get(lc.repo)
        sandbox.suspend(installation, suspended=False)
        await lc.settle()
        for lookup in others:
            assert await lookup.get(lc.repo) == installation.id
