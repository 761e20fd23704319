"""Chat's checkouts: one managed, read-only clone of each agent's repository under
`data_dir/checkouts/`, so a merged memory PR is in the next turn's committed memory.

A clone is refreshed before a turn when its last refresh is older than the configured
interval (once a minute by default) or when a `push` or a merged pull request said the
repository changed. Git runs as the worker's does (`bot.lifecycle.worktree.git`: no outside
config, no hooks, the installation token only as a header to the clone URL's origin). A
refresh that fails keeps the last good clone (or, with none yet, the configured checkout):
a turn never fails for it. Nothing writes to a clone but this module.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import IO, Protocol

from bot.config import AgentConfig
from bot.github.issue_records import Repository
from bot.lifecycle.worktree import git

log = logging.getLogger(__name__)


class RepoAccess(Protocol):
    """The slice of bot.github.client.GitHubClient a clone needs."""

    async def installation_token(self, repo: str) -> str: ...

    async def get_repo(self, repo: str) -> Repository: ...


class ManagedCheckouts:
    def __init__(
        self,
        root: Path,
        github: RepoAccess,
        *,
        refresh_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.github = github
        self.refresh_seconds = refresh_seconds
        self.clock = clock
        self._refreshed: dict[str, float] = {}
        self._stale: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}

    def folder(self, repo: str) -> Path:
        return self.root / repo.replace("/", "__")

    def mark_stale(self, repo: str) -> None:
        """The repository changed (a push, a merge): refresh before the next turn."""
        self._stale.add(repo)

    async def for_agent(self, agent: AgentConfig) -> AgentConfig:
        """The agent with its checkout pointing at a fresh enough managed clone."""
        return replace(agent, checkout=await self.ensure(agent.repo, fallback=agent.checkout))

    async def ensure(self, repo: str, *, fallback: Path) -> Path:
        folder = self.folder(repo)
        async with self._locks.setdefault(repo, asyncio.Lock()):
            last = self._refreshed.get(repo)
            fresh = last is not None and self.clock() - last < self.refresh_seconds
            if fresh and repo not in self._stale and (folder / ".git").is_dir():
                return folder
            self._stale.discard(repo)
            try:
                await self._sync(repo, folder)
            except Exception as exc:
                self._stale.add(repo)  # try again before the next turn
                log.warning("checkout of %s not refreshed: %s", repo, _reason(exc))
                return folder if (folder / ".git").is_dir() else fallback
            self._refreshed[repo] = self.clock()
            return folder

    async def _sync(self, repo: str, folder: Path) -> None:
        # `serve --processes N` shares data_dir: one process at a time runs git in a clone.
        lock = await asyncio.to_thread(_locked, folder.parent / f"{folder.name}.lock")
        try:
            await self._fetch(repo, folder)
        finally:
            lock.close()  # closing the file releases the lock

    async def _fetch(self, repo: str, folder: Path) -> None:
        info = await self.github.get_repo(repo)
        url, branch = info.clone_url, info.default_branch or "main"
        token = await self.github.installation_token(repo)
        if not (folder / ".git").is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            await git(folder.parent, "init", "-q", str(folder))
        await git(folder, "fetch", "-q", "--depth", "1", url, branch, token=token, url=url)
        await git(folder, "reset", "-q", "--hard", "FETCH_HEAD")
        await git(folder, "clean", "-q", "-fdx")
        log.info("checkout of %s refreshed at %s", repo, branch)


def _locked(path: Path) -> IO[str]:
    """The lock file, held exclusively (blocks until the other process is done)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a")  # held open (and locked) until the caller closes it
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def _reason(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {message}"[:300]
