"""The worker's composition root: `build_worker_context` builds the `LifecycleContext` a
worker hands every job, once per process (`steelframe worker`; `steelframe dev` passes the
web process's database, Redis and memory index as its overrides).

Apart from `steelframe.composition` (the web service's root) because a worker serves no
HTTP: importing the web shells (operator API, webhooks, GUI, Chat) cost each worker process
a fifth of a second of CPU at start for code it never runs. The `worker-without-web` import
contract (pyproject.toml, run by `make lint`) holds it to that.
"""

from __future__ import annotations

from collections.abc import Mapping

import redis

from bot.clock import Clock, utcnow
from bot.config import Settings
from bot.db import Database
from bot.lifecycle.context import (
    LifecycleContext,
    LifecyclePolicy,
    announce_commits,
    github_factory,
)
from bot.lifecycle.redact import Redactor, from_settings
from bot.lifecycle.seams import GitHubFactory, Memory
from bot.lifecycle.worker_environment import WorkerEnvironment
from bot.redis_auth import require_authenticated_redis


def build_worker_context(
    settings: Settings,
    *,
    environ: Mapping[str, str],
    db: Database | None = None,
    connection: redis.Redis | None = None,
    github: GitHubFactory | None = None,
    memory: Memory | bool | None = True,
    clock: Clock = utcnow,
    queue_name: str | None = None,
) -> LifecycleContext:
    """Everything a worker's jobs need, from settings; `memory=True` opens the
    installation's memory index. `environ` is the worker's environment, read here once
    (`WorkerEnvironment`: jobs never read `os.environ`): the key variables the coding
    runtime is given from it are secrets the logs must not show."""
    if connection is None:
        require_authenticated_redis(settings)  # before opening anything
    database = db or Database.from_url(settings.database_url)
    if memory is True:
        from memory import Memory as MemoryIndex

        memory = MemoryIndex.in_data_dir(settings.data_dir, database.session, clock=clock)
    if connection is None:
        if not settings.redis_url:
            raise ValueError("the lifecycle needs Redis: set STEELFRAME_REDIS_URL")
        connection = redis.Redis.from_url(settings.redis_url)
    announce_commits(database, connection)
    policy = LifecyclePolicy.from_settings(settings)
    environment = WorkerEnvironment.read(settings, environ)
    return LifecycleContext(
        settings=settings,
        db=database,
        redis=connection,
        github=github if github is not None else github_factory(settings, database),
        policy=policy,
        environment=environment,
        memory=memory or None,
        clock=clock,
        queue_name=queue_name or settings.task_queue,
        pickup_labels=settings.pickup_labels,
        redactor=lifecycle_redactor(settings, policy, environment.variables),
    )


def lifecycle_redactor(
    settings: Settings, policy: LifecyclePolicy, environ: Mapping[str, str]
) -> Redactor:
    """The settings' secrets and the values of every key variable the runtime is given."""
    redactor = from_settings(settings, environ)
    redactor.add(*(environ.get(name) for name in policy.sandbox.env_passthrough))
    return redactor
