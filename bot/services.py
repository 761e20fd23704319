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
from bot.chat.inflight import TurnRegistry
from bot.chat.service import ChatService, RuntimeFactory
from bot.clock import Clock, utcnow
from bot.config import AgentConfig, Settings
from bot.decisions import DecisionPublisher
from bot.filing import FilingService
from bot.runtimes.base import Runtime
from bot.runtimes.offline import OfflineRuntime

log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings
    db: dbmod.Database
    chat: ChatService
    registry: TurnRegistry
    background: BackgroundTasks
    redis: redis.Redis | None = None
    # Set when a GitHub App (or the dev sandbox) is configured; None answers 503.
    filing: FilingService | None = None
    publisher: DecisionPublisher | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    async def health(self) -> dict[str, Any]:
        database = await asyncio.to_thread(dbmod.ping, self.db.engine)
        redis_ok: bool | None = None
        if self.redis is not None:
            redis_ok = await asyncio.to_thread(_redis_ping, self.redis)
        return {"database": database, "redis": redis_ok}

    async def close(self) -> None:
        await self.registry.close()
        await self.background.close()
        if self.redis is not None:
            self.redis.close()
        self.db.dispose()


def _redis_ping(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def default_runtime_factory(settings: Settings) -> RuntimeFactory:
    """Runtimes by agent; the model runtimes register themselves in `bot.runtimes.registry`."""

    def build(agent: AgentConfig) -> Runtime:
        if agent.runtime == "offline":
            return OfflineRuntime()
        from bot.runtimes.registry import build_runtime

        return build_runtime(agent.runtime, settings, agent)

    return build


def build_services(
    settings: Settings,
    *,
    runtimes: RuntimeFactory | None = None,
    clock: Clock = utcnow,
    migrate: bool = True,
) -> Services:
    database = dbmod.Database.from_url(settings.database_url)
    if migrate:
        dbmod.upgrade(database.engine)
    database.call(sync_agents, settings.agents, clock=clock)
    redis_client = redis.Redis.from_url(settings.redis_url) if settings.redis_url else None
    registry = TurnRegistry()
    background = BackgroundTasks()
    chat = ChatService(
        db=database,
        settings=settings,
        runtimes=runtimes or default_runtime_factory(settings),
        registry=registry,
        background=background,
        clock=clock,
    )
    return Services(
        settings=settings,
        db=database,
        chat=chat,
        registry=registry,
        background=background,
        redis=redis_client,
    )
