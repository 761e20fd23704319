"""Whether this instance can serve: what /healthz reports and what /readyz requires."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import redis

from bot import __version__
from bot import db as dbmod
from bot.config import Settings
from bot.contracts import health as wire
from bot.contracts.health import Health, ReadinessCheck
from bot.lifecycle.sandbox import status as sandbox_status
from bot.serving_checks import coding_runtime_check, sandbox_checks, serving_checks
from memory import Memory


@dataclass(frozen=True)
class Readiness:
    settings: Settings
    db: dbmod.Database
    redis: redis.Redis | None
    memory: Memory | None

    async def health(self) -> Health:
        """Liveness's answer: `degraded` when the database, or Redis when configured, is
        unreachable (the process still answers: a restart would not fix them)."""
        database = await asyncio.to_thread(dbmod.ping, self.db.engine)
        redis_ok: bool | None = None
        if self.redis is not None:
            redis_ok = await asyncio.to_thread(_redis_ping, self.redis)
        return Health(
            status="ok" if database and redis_ok is not False else "degraded",
            version=__version__,
            database=database,
            redis=redis_ok,
            coding_sandbox=sandbox_status(self.settings),
        )

    async def ready(self) -> wire.Readiness:
        """What this instance needs to serve, each check ok or not with why: the database,
        Redis (when configured), the memory index, the GitHub App settings serving needs. A
        failing one makes /readyz answer 503 with why."""
        health = await self.health()
        checks = {
            "database": _check(
                health.database, "reachable", "unreachable: check STEELFRAME_DATABASE_URL"
            ),
        }
        if health.redis is not None:
            checks["redis"] = _check(
                health.redis, "reachable", "unreachable: check STEELFRAME_REDIS_URL"
            )
        if self.memory is not None:
            checks["index"] = await asyncio.to_thread(_index_check, self.memory)
        # The settings serving needs (each missing one a 503 reason), then the sandbox's
        # findings (bot.serving_checks.SANDBOX_CHECKS) and the coding runtime, said only.
        found = [
            *serving_checks(self.settings),
            *await asyncio.to_thread(sandbox_checks, self.settings),  # probes, cached
            coding_runtime_check(self.settings),
        ]
        for check in found:
            checks[check.name] = ReadinessCheck(ok=check.ok, detail=check.detail)
        ready = all(check.ok for check in checks.values())
        return wire.Readiness(status="ready" if ready else "not_ready", checks=checks)


def _check(ok: bool, good: str, bad: str) -> ReadinessCheck:
    return ReadinessCheck(ok=bool(ok), detail=good if ok else bad)


def _index_check(memory: Memory) -> ReadinessCheck:
    try:
        stats = memory.stats()
    except Exception as exc:  # any failure to read the index means not ready, with why
        detail = f"memory index unreadable: {type(exc).__name__}: {exc}"
        return ReadinessCheck(ok=False, detail=detail)
    return ReadinessCheck(ok=True, detail=f"{stats.chunks} chunks")


def _redis_ping(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
