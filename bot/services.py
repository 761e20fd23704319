"""The long-lived parts of one process, built once from settings and passed down.

Entry points (`serve`, `dev`, `worker`, tests) call `build_services`; later packages attach
their parts here (GitHub client, memory index, task queue) instead of creating globals.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from sqlalchemy.exc import IntegrityError

from bot import db as dbmod
from bot.agents import sync_agents
from bot.background import BackgroundTasks
from bot.chat.checkout import ManagedCheckouts
from bot.chat.coordination import LocalTurnLocks, RedisTurnLocks, TurnLocks
from bot.chat.frames import RedisFrameRelay
from bot.chat.inflight import DEFAULT_LINGER_SECONDS, TurnHandle, TurnRegistry
from bot.chat.intents import GitHubIntentPolicy
from bot.chat.issue_context import IssueContextLoader
from bot.chat.operator_commands import OperatorCommands
from bot.chat.retrieval import MemoryGrounder, chat_summary_sink
from bot.chat.search_words import model_search_words
from bot.chat.service import ChatService, RuntimeFactory
from bot.clock import Clock, utcnow
from bot.config import AgentConfig, Settings
from bot.decisions import DecisionPublisher
from bot.events import EventLog, LocalEventLog, OperatorEvents, RedisEventLog
from bot.filing import FilingService
from bot.github.client import GitHubClient
from bot.github.installations import stored_installations
from bot.lifecycle.announce import watch_commits
from bot.lifecycle.board import task_for_issue
from bot.lifecycle.metrics import lifecycle_collector
from bot.lifecycle.sandbox import status as sandbox_status
from bot.lifecycle.service import TaskService, build_task_service
from bot.metrics import Metrics
from bot.redis_auth import require_authenticated_redis
from bot.redis_clients import blocking_reader
from bot.runtimes.base import Runtime
from bot.runtimes.offline import OfflineRuntime
from bot.runtimes.registry import build_runtime, check_runtime_settings
from bot.runtimes.transport import SharedClient
from bot.serving_checks import coding_runtime_check, sandbox_checks, serving_checks
from bot.unanswered import Unanswered
from memory import Memory

log = logging.getLogger(__name__)
# The web service never waits longer than this for a row lock (PostgreSQL): a frozen worker
# holding one makes a request fail fast (503 busy) or record an intent, never hang.
REQUEST_LOCK_TIMEOUT_SECONDS = 2.0


@dataclass
class Services:
    settings: Settings
    db: dbmod.Database
    chat: ChatService
    registry: TurnRegistry
    background: BackgroundTasks
    # The operator events stream (task changes, results, sessions): Redis streams or local.
    events: OperatorEvents
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
    metrics: Metrics = field(default_factory=Metrics)
    # Requests whose answer has not started; a started chat turn yields to them.
    unanswered: Unanswered = field(default_factory=Unanswered)
    extras: dict[str, Any] = field(default_factory=dict)

    async def health(self) -> dict[str, Any]:
        database = await asyncio.to_thread(dbmod.ping, self.db.engine)
        redis_ok: bool | None = None
        if self.redis is not None:
            redis_ok = await asyncio.to_thread(_redis_ping, self.redis)
        return {
            "database": database,
            "redis": redis_ok,
            "coding_sandbox": sandbox_status(self.settings),
        }

    async def readiness(self) -> dict[str, dict[str, Any]]:
        """What this instance needs to serve, each {"ok", "detail"}: the database, Redis (when
        configured), the memory index, the GitHub App settings serving needs. A failing one
        makes /readyz answer 503 with why."""
        health = await self.health()
        checks: dict[str, dict[str, Any]] = {
            "database": _check(
                health["database"], "reachable", "unreachable: check STEELFRAME_DATABASE_URL"
            ),
        }
        if health["redis"] is not None:
            checks["redis"] = _check(
                health["redis"], "reachable", "unreachable: check STEELFRAME_REDIS_URL"
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
            checks[check.name] = {"ok": check.ok, "detail": check.detail}
        return checks

    async def close(self) -> None:
        await self.registry.close()
        await self.chat.writes.close()  # the writes of the turns just stopped
        await self.chat.locks.close()
        await self.model_http.close()
        await self.background.close()
        await self.events.log.close()
        if self.redis is not None:
            self.redis.close()
        if self.github is not None:
            await self.github.close()
        self.db.dispose()


def _check(ok: bool, good: str, bad: str) -> dict[str, Any]:
    return {"ok": bool(ok), "detail": good if ok else bad}


def _index_check(memory: Memory) -> dict[str, Any]:
    try:
        stats = memory.stats()
    except Exception as exc:  # any failure to read the index means not ready, with why
        return {"ok": False, "detail": f"memory index unreadable: {type(exc).__name__}: {exc}"}
    return {"ok": True, "detail": f"{stats['chunks']} chunks"}


def _redis_ping(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def _sync_agents(database: dbmod.Database, settings: Settings, clock: Clock) -> None:
    """Mirror the agents; two instances starting together may both insert a row, and the
    loser's next round finds it."""
    for attempt in range(3):
        try:
            database.call(sync_agents, settings.agents, clock=clock)
            return
        except IntegrityError:
            if attempt == 2:
                raise


def _log_reindex_progress() -> Callable[[int, int], None]:
    """Start-up rebuild progress as a log line per tenth (a service has no terminal)."""
    shown: set[int] = set()

    def report(done: int, total: int) -> None:
        tenth = 10 if total <= 0 else min(10, done * 10 // total)
        if tenth not in shown:
            shown.add(tenth)
            log.warning("memory: rebuilding the index: %d/%d chunks", done, total)

    return report


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
    require_authenticated_redis(settings)
    model_http = SharedClient(settings.model_connections, settings.model_connections_per_host)
    database = _open_database(settings, clock=clock, migrate=migrate)
    redis_client = redis.Redis.from_url(settings.redis_url) if settings.redis_url else None
    locks, registry = _turn_coordination(settings)
    events = _operator_events(settings, database, redis_client)
    metrics = Metrics()
    background = BackgroundTasks()
    memory = _open_memory(settings, database, clock)
    unanswered = Unanswered()
    runtime_factory = runtimes or default_runtime_factory(settings, model_http)
    chat = ChatService(
        db=database,
        settings=settings,
        runtimes=runtime_factory,
        registry=registry,
        background=background,
        grounder=MemoryGrounder(
            memory,
            background=background,
            # The focused issue's task enters the prompt as task JSON (DESIGN: one chat turn).
            tasks=lambda agent, issue: database.call(task_for_issue, agent.repo, issue),
            # rounds 2 and 3 search with the model's words too (bot/chat/search_words.py)
            search_words=(
                model_search_words(runtime_factory) if settings.chat_model_search_words else None
            ),
        ),
        summary_sinks=(chat_summary_sink(settings.agents),),
        locks=locks,
        events=events,
        clock=clock,
        unanswered=unanswered,
    )
    services = Services(
        settings=settings,
        db=database,
        chat=chat,
        registry=registry,
        background=background,
        events=events,
        redis=redis_client,
        memory=memory,
        github=_github_client(settings, database, metrics),
        metrics=metrics,
        model_http=model_http,
        unanswered=unanswered,
    )
    if redis_client is not None:
        _attach_lifecycle(services, redis_client, clock)
    if services.github is not None:
        _attach_github_intents(services, services.github, clock)
    return services


def _open_database(settings: Settings, *, clock: Clock, migrate: bool) -> dbmod.Database:
    """The database at the schema this code expects, with the configured agents mirrored."""
    database = dbmod.Database.from_url(
        settings.database_url, lock_timeout=REQUEST_LOCK_TIMEOUT_SECONDS
    )
    if migrate:
        dbmod.upgrade(database.engine)
    _sync_agents(database, settings, clock)
    return database


def _turn_coordination(settings: Settings) -> tuple[TurnLocks, TurnRegistry]:
    """One turn per operator across instances (Redis locks) and the running turns' frames
    relayed to any instance (Redis); in-process stand-ins without Redis."""
    locks: TurnLocks = (
        RedisTurnLocks(settings.redis_url) if settings.redis_url else LocalTurnLocks()
    )

    async def release_turn(handle: TurnHandle) -> None:
        await locks.release(handle.operator_id, handle.turn_id)

    relay = (
        RedisFrameRelay(
            settings.redis_url,
            linger=DEFAULT_LINGER_SECONDS,
            longest_block=settings.heartbeat_seconds,
        )
        if settings.redis_url
        else None
    )
    return locks, TurnRegistry(on_finish=release_turn, relay=relay)


def _operator_events(
    settings: Settings, database: dbmod.Database, redis_client: redis.Redis | None
) -> OperatorEvents:
    """The operator events stream (Redis streams, or in-process), fed by every commit."""
    event_log: EventLog = LocalEventLog()
    if settings.redis_url and redis_client is not None:
        reader = blocking_reader(settings.redis_url, longest_block=settings.heartbeat_seconds)
        event_log = RedisEventLog(redis_client, reader=reader)
    events = OperatorEvents(event_log, database)
    watch_commits(database, events)
    return events


def _open_memory(settings: Settings, database: dbmod.Database, clock: Clock) -> Memory:
    memory = Memory.in_data_dir(settings.data_dir, database.session, clock=clock)
    # An index left by another database under this data directory is rebuilt now, at start,
    # not answered from (memory.identity).
    memory.bind(progress=_log_reindex_progress())
    return memory


def _github_client(
    settings: Settings, database: dbmod.Database, metrics: Metrics
) -> GitHubClient | None:
    """The App client when one is configured; it finds a repository's installation in what
    the webhooks stored before asking GitHub."""
    if not settings.github_configured:
        return None
    return GitHubClient.from_settings(
        settings,
        observe=metrics.github_answer,
        stored_installation=stored_installations(database),
    )


def _attach_lifecycle(services: Services, redis_client: redis.Redis, clock: Clock) -> None:
    """The task lifecycle (it needs Redis for its queue) and its metrics."""
    settings, database = services.settings, services.db
    services.tasks = build_task_service(
        db=database,
        connection=redis_client,
        github=services.github,
        pickup_labels=settings.pickup_labels,
        time_limit=settings.task_time_limit,
        clock=clock,
    )
    services.metrics.add_collector(lifecycle_collector(database, redis_client))


def _attach_github_intents(services: Services, github: GitHubClient, clock: Clock) -> None:
    """With a GitHub App, Chat's filing intents file for real (still only on request), its
    focused issue is read from GitHub and its checkouts are kept fresh."""
    settings, database, chat = services.settings, services.db, services.chat
    services.filing = FilingService(
        db=database,
        github=github,
        tasks=services.tasks,
        pickup_labels=settings.pickup_labels,
        clock=clock,
    )
    services.publisher = DecisionPublisher(db=database, github=github, clock=clock)
    chat.issues = IssueContextLoader(github)
    chat.checkouts = ManagedCheckouts(
        settings.data_dir / "checkouts",
        github,
        refresh_seconds=settings.checkout_refresh_seconds,
    )
    # The operator's typed commands ("publish it", ...) first, then the filing policy.
    chat.policy = OperatorCommands(
        GitHubIntentPolicy(services.filing), db=database, publisher=services.publisher
    )
