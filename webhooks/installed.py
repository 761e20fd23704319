"""Whether the App is installed on a delivery's repository, asked before any handler runs.

A signed delivery about a repository the App has no installation for (a repository webhook
sharing the secret, a payload from another App's installation) became a task. Now such a
delivery is stored and `ignored`, with the reason, and no handler sees it. The answer comes
from the GitHub client's installation lookup (cached, then what `installation` events
stored, then `GET /repos/{owner}/{repo}/installation`), never from the payload: the
delivery's own `installation.id` must agree with it.

Without an App configured there is no installation to ask about, and nothing is checked
(nothing can act on GitHub then either).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from bot.github.client import GitHubClient
from bot.github.errors import GitHubNotFound
from webhooks.routing import lookup

# Events about installations themselves, or about no repository: they say where the App is.
EXEMPT = frozenset(
    {"installation", "installation_repositories", "ping", "github_app_authorization"}
)


MISSING_SECONDS = 60.0  # a repository GitHub said has no installation, before asking again


class InstallationCheck:
    """`not_installed`, remembering GitHub's "no installation" for MISSING_SECONDS, so a
    flood of deliveries about one such repository costs one API call, not one each."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._missing: dict[str, float] = {}

    async def not_installed(self, github: GitHubClient | None, event: str, data: Any) -> str | None:
        """Why the delivery must be ignored, or None (installed, or nothing to check).
        Errors other than GitHub's 404 propagate: the delivery is retried, never dropped."""
        repo = lookup(data, "repository.full_name")
        if github is None or event in EXEMPT or not isinstance(repo, str):
            return None
        key = repo.lower()
        if self._missing.get(key, -math.inf) > self._clock():
            return _NONE.format(repo=repo)
        named = lookup(data, "installation.id")
        try:
            serving = await github.installations.get(repo)
            if isinstance(named, int) and named != serving:
                # Reinstalled since the lookup cached it? Ask GitHub itself once.
                github.installations.invalidate(repo)
                serving = await github.installations.get(repo)
        except GitHubNotFound:
            if len(self._missing) > 10_000:
                self._missing.clear()
            self._missing[key] = self._clock() + MISSING_SECONDS
            return _NONE.format(repo=repo)
        if isinstance(named, int) and named != serving:
            return f"the delivery names installation {named}, but {repo} is served by {serving}"
        return None


_NONE = "the App has no installation for {repo}"
