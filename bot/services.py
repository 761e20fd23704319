"""The long-lived parts of one process, built once from settings and passed down.

Entry points (`serve`, `dev`, `worker`, tests) call `build_services`; later packages attach
their parts here (GitHub client, memory index, task queue) instead of creating globals.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import redis

from bot import db as dbmod
from bot.agents import sync_agents
from bot.background import BackgroundTasks
from bot.chat.coordination import LocalTurnLocks, RedisTurnLocks, TurnLocks
from bot.chat.inflight import TurnHandle, TurnRegistry
from bot.chat.intents import GitHubIntentPolicy
from bot.chat.retrieval import MemoryGrounder, chat_summary_sink
from bot.chat.service import ChatService, RuntimeFactory
from bot.clock import Clock, utcnow
from bot.config import AgentConfig, Settings
from bot.decisions import DecisionPublisher
from bot.filing import FilingService
from bot.github.client import GitHubClient
from bot.github.installations import stored_installations
from bot.lifecycle.service import TaskService, build_task_service
from bot.lifecycle.tasks import task_for_issue
from bot.runtimes.base import Runtime
from bot.runtimes.offline import OfflineRuntime
from bot.runtimes.registry import build_runtime, check_runtime_settings
from bot.runtimes.transport import SharedClient
from memory import Memory

log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings
    db: dbmod.Database
    chat: ChatService
    registry: TurnRegistry
    background: BackgroundTasks
    redis: redis.Redis | None = None
    # Session memory: chunk store + index (`memory.search`, `memory.add`) for every part.
    memory: Memory | None = None
    # The GitHub App client when APP_ID and a private key are configured (dev: the sandbox).
    github: GitHubClient | None = None
    # Set when a GitHub App (or the dev sandbox) is configured; None answers 503.
    filing: FilingService | None = None
    publisher: DecisionPublisher | None = None
    # The task lifecycle (pickup, resume, terminate, board) when Redis is configured.
    tasks: TaskService | None = None
    model_http: SharedClient = field(default_factory=SharedClient)
    extras: dict[str, Any] = field(default_factory=dict)

    async def health(self) -> dict[str, Any]:
        database = await asyncio.to_thread(dbmod.ping, self.db.engine)
        redis_ok: bool | None = None
        if self.redis is not None:
            redis_ok = await asyncio.to_thread(_redis_ping, self.redis)
        return {"database": database, "redis": redis_ok}

    async def close(self) -> None:
        await self.registry.close()
        await self.chat.locks.close()
        await self.model_http.close()
        await self.background.close()
        if self.redis is not None:
            self.redis.close()
        if self.github is not None:
            await self.github.close()
        self.db.dispose()


def _redis_ping(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def default_runtime_factory(settings: Settings, http: SharedClient) -> RuntimeFactory:
    """Runtimes by agent (bot.runtimes.registry), sharing one connection pool per process."""

    def build(agent: AgentConfig) -> Runtime:
        if agent.runtime == "offline":
            return OfflineRuntime()
        return build_runtime(agent.runtime, settings, agent, http=http.get())

    return build


def build_services(
    settings: Settings,
    *,
    runtimes: RuntimeFactory | None = None,
    clock: Clock = utcnow,
    migrate: bool = True,
) -> Services:
    check_runtime_settings(settings)  # a bad model setting stops start-up, naming it
    model_http = SharedClient()
    database = dbmod.Database.from_url(settings.database_url)
    if migrate:
        dbmod.upgrade(database.engine)
    database.call(sync_agents, settings.agents, clock=clock)
    redis_client = redis.Redis.from_url(settings.redis_url) if settings.redis_url else None
    locks: TurnLocks = (
        RedisTurnLocks(settings.redis_url) if settings.redis_url else LocalTurnLocks()
    )

    async def release_turn(handle: TurnHandle) -> None:
        await locks.release(handle.operator_id, handle.turn_id)

    registry = TurnRegistry(on_finish=release_turn)
    background = BackgroundTasks()
    memory = Memory.in_data_dir(settings.data_dir, database.session, clock=clock)
    chat = _chat_service(
        settings,
        database,
        memory,
        runtimes or default_runtime_factory(settings, model_http),
        registry=registry,
        background=background,
        locks=locks,
        clock=clock,
    )
    services = Services(
        settings=settings,
        db=database,
        chat=chat,
        registry=registry,
        background=background,
        redis=redis_client,
        memory=memory,
        github=_github_client(settings, database),
        model_http=model_http,
    )
    if redis_client is not None:
        services.tasks = build_task_service(
            db=database,
            connection=redis_client,
            github=services.github,
            pickup_labels=settings.pickup_labels,
            time_limit=settings.task_time_limit,
            clock=clock,
        )
    if services.github is not None:
        _file_and_publish_on_github(services, services.github, clock)
    return services


def _chat_service(
    settings: Settings,
    database: dbmod.Database,
    memory: Memory,
    runtimes: RuntimeFactory,
    *,
    registry: TurnRegistry,
    background: BackgroundTasks,
    locks: TurnLocks,
    clock: Clock,
) -> ChatService:
    return ChatService(
        db=database,
        settings=settings,
        runtimes=runtimes,
        registry=registry,
        background=background,
        grounder=MemoryGrounder(
            memory,
            background=background,
            # The focused issue's task enters the prompt as task JSON (DESIGN: one chat turn).
            tasks=lambda agent, issue: database.call(task_for_issue, agent.repo, issue),
        ),
        summary_sinks=(chat_summary_sink(settings.agents),),
        locks=locks,
        clock=clock,
    )


def _github_client(settings: Settings, database: dbmod.Database) -> GitHubClient | None:
    if not settings.github_configured:
        return None
    # Which installation serves a repository: what the webhooks stored, before GitHub.
    return GitHubClient.from_settings(settings, stored_installation=stored_installations(database))


def _file_and_publish_on_github(services: Services, github: GitHubClient, clock: Clock) -> None:
    """With a GitHub App, Chat's filing intents file for real (still only on request) and
    Decisions are published."""
    services.filing = FilingService(
        db=services.db,
        github=github,
        tasks=services.tasks,
        pickup_labels=services.settings.pickup_labels,
        clock=clock,
    )
    services.publisher = DecisionPublisher(db=services.db, github=github, clock=clock)
    services.chat.policy = GitHubIntentPolicy(services.filing)
