"""What a lifecycle job needs, built once per worker process by the worker's composition root.

RQ job functions are enqueued with only a task id (the job is JSON in Redis). The
composition root (`steelframe.worker_context.build_worker_context`, for `steelframe worker`,
`steelframe dev` and tests) builds one `LifecycleContext` from its settings and its
environment and gives it to the worker, which hands it to every job it runs
(`bot.lifecycle.worker`). Nothing here is process-global and nothing reads the environment.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import redis

import bot
from bot.clock import Clock, utcnow
from bot.config import Settings
from bot.config_values import DEFAULT_TASK_QUEUE
from bot.db import Database
from bot.events import OperatorEvents, RedisEventLog
from bot.lifecycle.agents.presets import PRESETS, Agent, adapter_command, demo_command
from bot.lifecycle.announce import watch_commits
from bot.lifecycle.push_limit import PushLimits
from bot.lifecycle.redact import Redactor
from bot.lifecycle.sandbox import SandboxPolicy
from bot.lifecycle.seams import GitHubApi, GitHubFactory, Memory
from bot.lifecycle.worker_environment import WorkerEnvironment

if TYPE_CHECKING:  # the App client is imported by the first job that needs it
    from bot.github.app_auth import KeptTokens

DEFAULT_QUEUE = DEFAULT_TASK_QUEUE  # STEELFRAME_TASK_QUEUE's default
# Retry delays double from the configured base up to this cap.
MAX_BACKOFF_SECONDS = 3600.0


@dataclass(frozen=True)
class LifecyclePolicy:
    """Limits and timings of runs (docs/lifecycle.md, "Limits" and "Retries")."""

    time_limit: float = 1800.0
    max_attempts: int = 3
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    lease_seconds: float = 60.0
    backoff_seconds: float = 30.0
    coding_command: tuple[str, ...] | None = None
    # Which agent runs (bot.config.CODING_AGENTS); None: no coding runtime is configured.
    coding_agent: str | None = None
    coding_model: str | None = None
    max_turns: int = 50
    # USD per million tokens of the coding model, for agents that report only tokens.
    coding_prices: dict[str, float] | None = None
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    push: PushLimits = field(default_factory=PushLimits)

    @classmethod
    def from_settings(cls, settings: Settings) -> LifecyclePolicy:
        command = tuple(shlex.split(settings.coding_command)) if settings.coding_command else None
        agent = settings.coding_agent or ("command" if command else None)
        if agent == Agent.DEMO:
            command = demo_command()
        elif agent not in (None, Agent.COMMAND):
            # Presets run through the adapter, a coding command like any other, so the
            # coding sandbox wraps every agent the same way.
            command = adapter_command(Agent(agent))
        return cls(
            time_limit=float(settings.task_time_limit),
            max_attempts=settings.task_max_attempts,
            max_tokens=settings.task_max_tokens,
            max_cost_usd=settings.task_max_cost_usd,
            lease_seconds=settings.task_lease_seconds,
            backoff_seconds=settings.task_retry_backoff_seconds,
            coding_command=command or None,
            coding_agent=agent,
            coding_model=settings.coding_model,
            max_turns=settings.coding_max_turns,
            coding_prices=settings.model_prices.get(settings.coding_model or ""),
            sandbox=_sandbox_policy(settings, agent),
            push=PushLimits(settings.push_max_bytes, settings.push_max_file_bytes),
        )

    @property
    def heartbeat_seconds(self) -> float:
        return self.lease_seconds / 3

    def backoff(self, attempt: int) -> float:
        """Delay before attempt `attempt + 1`: base, 2x base, 4x base ... capped."""
        return min(self.backoff_seconds * 2.0 ** max(0, attempt - 1), MAX_BACKOFF_SECONDS)


def _sandbox_policy(settings: Settings, agent: str | None) -> SandboxPolicy:
    """The operator's sandbox, plus what a preset or the demo needs inside it: its key
    variables and own settings, its model API on the egress allowlist, and this
    interpreter with Steelframe's `bot` package
    (read-only; the adapter runs from them). Never the checkout around the package: in
    development the data directory lives there."""
    policy = SandboxPolicy.from_settings(settings)
    if agent in (None, Agent.COMMAND):
        return policy
    preset = PRESETS.get(Agent(agent))
    runtime = (Path(sys.prefix), Path(sys.base_prefix), Path(bot.__file__).resolve().parent)
    return replace(
        policy,
        env_passthrough=(*policy.env_passthrough, *(preset.key_variables if preset else ())),
        env_prefixes=preset.own_prefixes if preset else (),
        read_only=(*policy.read_only, *runtime),
        configured_hosts=(*policy.configured_hosts, *(preset.api_hosts if preset else ())),
        url_variables=preset.url_variables if preset else (),
    )


@dataclass
class LifecycleContext:
    settings: Settings
    db: Database
    redis: redis.Redis
    github: GitHubFactory | None
    policy: LifecyclePolicy
    environment: WorkerEnvironment  # read once at the worker's start
    memory: Memory | None = None
    clock: Clock = utcnow
    queue_name: str = DEFAULT_QUEUE
    pickup_labels: tuple[str, ...] = ("steelframe:work-on-this",)
    # Known secret values; runs add the tokens they mint (bot.lifecycle.redact).
    redactor: Redactor = field(default_factory=Redactor)
    _pid: int = field(default_factory=os.getpid)

    @property
    def worktrees(self) -> Path:
        return self.settings.data_dir / "worktrees"

    def after_fork(self) -> None:
        """A forked work horse must not reuse the parent's pooled database connections."""
        if self._pid != os.getpid():
            self.db.engine.dispose(close=False)
            self._pid = os.getpid()


@dataclass(frozen=True)
class AppClients:
    """A fresh App client per job (each job runs its own event loop). With `db`, a job's
    client finds a repository's installation in what the webhooks stored before asking
    GitHub (a fresh client has no cache). The clients share their installation tokens,
    `kept` (a work horse forked from the worker starts with the worker's, and hands back
    the ones it minted: bot.lifecycle.worker), so a job or a reconcile pass mints a token
    only when none of its scope is current."""

    settings: Settings
    db: Database | None = None
    kept: KeptTokens = field(default_factory=dict)

    def __call__(self) -> AbstractAsyncContextManager[GitHubApi]:
        return self._client()

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[GitHubApi]:
        from bot.github.client import GitHubClient
        from bot.github.installations import stored_installations

        stored = stored_installations(self.db) if self.db is not None else None
        github = GitHubClient.from_settings(
            self.settings, stored_installation=stored, kept_tokens=self.kept
        )
        try:
            yield github
        finally:
            await github.close()


def github_factory(settings: Settings, db: Database | None = None) -> GitHubFactory | None:
    """The App's clients for jobs (`AppClients`), or None without an App."""
    if not settings.github_configured:
        return None
    return AppClients(settings, db)


def announce_commits(database: Database, connection: redis.Redis) -> None:
    """Task changes and results committed through `database` go to the operator events
    stream: every database a lifecycle process writes through needs this, or what it commits
    (a reconciler's repair, a result it delivers) never reaches the operators' screens."""
    watch_commits(database, OperatorEvents(RedisEventLog(connection), database))
