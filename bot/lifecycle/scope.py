"""One run's scope: the context, client, task and lease a started run's steps share,
and the watch that tells them to stop (terminated, or the lease lost)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from bot.lifecycle import leases
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.leases import Holder
from bot.lifecycle.models import Task
from bot.lifecycle.public_text import PublicPlace
from bot.lifecycle.repo_config import RepoEnv
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.setup_process import CommandResult
from bot.lifecycle.worktree import Claim

MAX_PUBLIC_BLOCK = 4000


class RunStopped(Exception):
    """The run must end now without touching the task: terminated, or the lease was lost."""


@dataclass
class Watch:
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    reason: str = ""

    def halt(self, reason: str) -> None:
        self.reason = reason
        self.stop.set()

    def check(self) -> None:
        if self.stop.is_set():
            raise RunStopped(self.reason)


@dataclass
class Run:
    """What every step of one run needs."""

    ctx: LifecycleContext
    github: GitHubApi
    task: Task
    holder: Holder
    actor: str
    watch: Watch
    folder: Path
    # This run's claim on the task's branch while it holds one (`branch.let_go` ends it).
    claim: Claim | None = None
    # The repository's environment (setup_run.prepare) and its test command's result.
    repo_env: RepoEnv | None = None
    tests: CommandResult | None = None

    @property
    def fence(self) -> str:
        return self.holder.id

    def public(self, text: str, limit: int = MAX_PUBLIC_BLOCK) -> str:
        """Text from outside (the runtime's words, the issue title) as one line of a
        comment or pull request: redacted, flattened, defanged (`public_text`), at most `limit`
        characters however the rules escaped it."""
        return self.ctx.redactor.published(text, self.place, limit)

    def public_block(self, text: str, limit: int = MAX_PUBLIC_BLOCK) -> str:
        """The same, keeping line breaks (a summary, a question)."""
        return self.ctx.redactor.published(text, self.place, limit, keep_lines=True)

    @property
    def place(self) -> PublicPlace:
        """Where this run's public text goes: its own issue's closing keyword and links to
        the repository's host are the only ones kept."""
        api = self.ctx.settings.github_api_url
        return PublicPlace.of(self.task.repo, self.task.issue, api)

    async def check_lease(self) -> None:
        """Before an effect outside the database: stopped, or lost the lease, changes nothing.
        Awaited right before the effect, nothing in between. The lease is read on a worker
        thread (`leases.confirm`), not on the run's loop, which meanwhile goes on: the watch
        is looked at again once the read answers, so a stop it heard then (terminated, the
        lease lost) still stops the run before the effect."""
        self.watch.check()
        await leases.confirm(self.ctx.db, self.task.id, self.holder, clock=self.ctx.clock)
        self.watch.check()
