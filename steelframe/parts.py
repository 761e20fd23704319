"""The long-lived parts of one web process, built once from settings by the composition
root (`steelframe.composition`), which makes each shell's dependency object from them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import redis
from aiohttp import web
from sqlalchemy.exc import IntegrityError

from bot import db as dbmod
from bot.agents import sync_agents
from bot.background import BackgroundTasks
from bot.chat.coordination import LocalTurnLocks, RedisTurnLocks, TurnLocks
from bot.chat.embeddings import EmbeddingsClient
from bot.chat.frame_relay import RedisFrameRelay
from bot.chat.hybrid import HybridRanking
from bot.chat.inflight import DEFAULT_LINGER_SECONDS, TurnHandle, TurnRegistry
from bot.chat.intents import DraftOnlyPolicy, GitHubIntentPolicy, IntentPolicy
from bot.chat.issue_context import IssueContextLoader
from bot.chat.operator_commands import OperatorCommands
from bot.chat.pipeline import TurnPipeline
from bot.chat.retrieval import MemoryGrounder
from bot.chat.search_words import model_search_words
from bot.chat.session_service import SessionService
from bot.chat.summariser import Summariser
from bot.chat.summary_sink import chat_summary_sink
from bot.chat.task_reader import TaskReader
from bot.chat.turn_parts import RuntimeFactory, TurnParts
from bot.checkouts import ManagedCheckouts
from bot.clock import Clock, utcnow
from bot.config import AgentConfig, Settings
from bot.decisions import DecisionPublisher
from bot.events import EventLog, LocalEventLog, OperatorEvents, RedisEventLog
from bot.filing import FilingService
from bot.github.client import GitHubClient
from bot.github.installations import stored_installations
from bot.lifecycle.announce import watch_commits
from bot.lifecycle.board import focused_task, pull_left
from bot.lifecycle.budget_metrics import budget_collector
from bot.lifecycle.metrics import lifecycle_collector
from bot.lifecycle.pickup import Pickups
from bot.lifecycle.queue import LifecycleQueue
from bot.lifecycle.resume import Resumes
from bot.lifecycle.terminate import Terminations
from bot.metrics import Metrics
from bot.readiness import Readiness
from bot.redis_auth import require_authenticated_redis
from bot.redis_clients import blocking_reader
from bot.runtimes.base import Runtime
from bot.runtimes.offline import OfflineRuntime
from bot.runtimes.registry import build_runtime, check_runtime_settings
from bot.runtimes.transport import SharedClient
from bot.unanswered import Unanswered
from memory import Memory

log = logging.getLogger(__name__)
# The web service never waits longer than this for a row lock (PostgreSQL): a frozen worker
# holding one makes a request fail fast (503 busy) or record an intent, never hang.
REQUEST_LOCK_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class TaskLifecycle:
    """The task lifecycle's parts for the shells, one per noun, each built whole on the one
    queue (the lifecycle needs Redis for it): pickups (webhooks and Chat filings), Decisions,
    operators' terminates, and the queue itself (review and CI webhooks queue runs on it)."""

    queue: LifecycleQueue
    pickups: Pickups
    resumes: Resumes
    terminations: Terminations


@dataclass(frozen=True)
class Parts:
    """What one web process built, each part once: the composition root makes the shells'
    dependency objects from them (steelframe.composition) and closes them at exit. No
    handler sees this; each gets its shell's object."""

    settings: Settings
    db: dbmod.Database
    clock: Clock
    # Chat: its turns (bot.chat.pipeline) and its sessions (bot.chat.session_service).
    chat_turns: TurnPipeline
    chat_sessions: SessionService
    registry: TurnRegistry
    background: BackgroundTasks
    # The operator events stream (task changes, results, sessions): Redis streams or local.
    events: OperatorEvents
    redis: redis.Redis | None
    # Session memory: chunk store + index (`memory.search`, `memory.add`) for every part.
    memory: Memory
    # The GitHub App client when APP_ID and a private key are configured (dev: the sandbox).
    github: GitHubClient | None
    # Set when a GitHub App (or the dev sandbox) is configured; None answers 503.
    filing: FilingService | None
    publisher: DecisionPublisher | None
    # The task lifecycle (pickup, resume, terminate, its queue) when Redis is configured.
    lifecycle: TaskLifecycle | None
    model_http: SharedClient
    metrics: Metrics
    # Requests whose answer has not started; a started chat turn yields to them.
    unanswered: Unanswered

    @property
    def readiness(self) -> Readiness:
        return Readiness(self.settings, self.db, self.redis, self.memory)

    async def close(self) -> None:
        await self.registry.close()
        await self.chat_turns.close()  # the writes of the turns just stopped
        await self.chat_turns.locks.close()
        await self.model_http.close()
        await self.background.close()
        await self.events.log.close()
        if self.redis is not None:
            self.redis.close()
        if self.github is not None:
            await self.github.close()
        self.db.dispose()


PARTS = web.AppKey("parts", Parts)


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


def build_parts(
    settings: Settings,
    *,
    runtimes: RuntimeFactory | None = None,
    clock: Clock = utcnow,
    migrate: bool = True,
) -> Parts:
    """Every part, each constructed whole: Chat gets its GitHub-backed issue loader,
    checkouts and policy at construction, not patched in afterwards."""
    check_settings(settings)
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
    github = _github_client(settings, database, metrics)
    lifecycle = _task_lifecycle(settings, database, redis_client, github, metrics, clock)
    pickups = lifecycle.pickups if lifecycle is not None else None
    filing, publisher = _github_intents(settings, database, github, pickups, clock)
    chat_github = _chat_github(settings, database, github, filing, publisher, memory)
    parts = TurnParts(
        runtimes=runtime_factory,
        grounder=MemoryGrounder(
            memory,
            background=background,
            # The focused issue's task enters the prompt as task JSON (DESIGN: one chat turn).
            tasks=lambda agent, issue: database.call(focused_task, agent.repo, issue),
            # rounds 2 and 3 search with the model's words too (bot/chat/search_words.py)
            search_words=(
                model_search_words(runtime_factory) if settings.chat_model_search_words else None
            ),
            # a dense round fused with round 1, when embeddings are on (bot/chat/hybrid.py)
            hybrid=_hybrid(settings, memory, model_http, background),
        ),
        policy=chat_github.policy,
        locks=locks,
        events=events,
        issues=chat_github.issues,
        checkouts=chat_github.checkouts,
    )
    chat_turns = TurnPipeline(
        db=database,
        settings=settings,
        registry=registry,
        parts=parts,
        clock=clock,
        unanswered=unanswered,
    )
    summaries = Summariser(
        db=database,
        agents=settings.agents,
        runtimes=runtime_factory,
        background=background,
        sinks=(chat_summary_sink(settings.agents),),
        events=events,
    )
    chat_sessions = SessionService(
        db=database,
        agents=settings.agents,
        registry=registry,
        locks=locks,
        summaries=summaries,
        events=events,
        issues=chat_github.issues,
        clock=clock,
    )
    return Parts(
        settings=settings,
        db=database,
        clock=clock,
        chat_turns=chat_turns,
        chat_sessions=chat_sessions,
        registry=registry,
        background=background,
        events=events,
        redis=redis_client,
        memory=memory,
        github=github,
        filing=filing,
        publisher=publisher,
        lifecycle=lifecycle,
        model_http=model_http,
        metrics=metrics,
        unanswered=unanswered,
    )


def check_settings(settings: Settings) -> None:
    """What stops start-up before anything is opened: a bad model setting (naming it), a
    remote Redis without a password."""
    check_runtime_settings(settings)
    require_authenticated_redis(settings)


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
    # The forgets logged as long as the relayed frames live; caught up on before the frames
    # that waited for a Redis that was away are written (bot.chat.coordination).
    shared = (
        RedisTurnLocks(
            settings.redis_url,
            ttl_seconds=settings.chat_turn_slot_ttl_seconds,
            forgets_kept=DEFAULT_LINGER_SECONDS,
        )
        if settings.redis_url
        else None
    )
    locks: TurnLocks = LocalTurnLocks() if shared is None else shared

    async def release_turn(handle: TurnHandle) -> None:
        await locks.release(handle.operator_id, handle.turn_id)

    relay = (
        RedisFrameRelay(
            shared.url,
            linger=DEFAULT_LINGER_SECONDS,
            longest_block=settings.heartbeat_seconds,
            slot_ttl=settings.chat_turn_slot_ttl_seconds,
            catch_up=shared.catch_up_forgets,
        )
        if shared is not None
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


def _hybrid(
    settings: Settings, memory: Memory, http: SharedClient, background: BackgroundTasks
) -> HybridRanking | None:
    """The hybrid ranking's dense round (STEELFRAME_CHAT_EMBEDDINGS; off: None)."""
    embeddings = settings.embeddings()
    if embeddings is None:
        return None
    return HybridRanking(EmbeddingsClient(embeddings, http.get), memory, background=background)


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


def _task_lifecycle(
    settings: Settings,
    database: dbmod.Database,
    redis_client: redis.Redis | None,
    github: GitHubClient | None,
    metrics: Metrics,
    clock: Clock,
) -> TaskLifecycle | None:
    """The task lifecycle (it needs Redis for its queue) and its metrics."""
    if redis_client is None:
        return None
    metrics.add_collector(lifecycle_collector(database, redis_client, settings.task_queue))
    metrics.add_collector(budget_collector(metrics, database, clock))
    queue = LifecycleQueue(
        redis_client, name=settings.task_queue, time_limit=settings.task_time_limit
    )
    labels = settings.pickup_labels
    return TaskLifecycle(
        queue=queue,
        pickups=Pickups(db=database, queue=queue, github=github, pickup_labels=labels, clock=clock),
        resumes=Resumes(db=database, queue=queue, github=github, clock=clock),
        terminations=Terminations(db=database, queue=queue, github=github, clock=clock),
    )


def _github_intents(
    settings: Settings,
    database: dbmod.Database,
    github: GitHubClient | None,
    pickups: Pickups | None,
    clock: Clock,
) -> tuple[FilingService | None, DecisionPublisher | None]:
    """With a GitHub App, filing and publishing (still only on the operator's request)."""
    if github is None:
        return None, None
    filing = FilingService(
        db=database, github=github, tasks=pickups, pickup_labels=settings.pickup_labels, clock=clock
    )
    return filing, DecisionPublisher(db=database, github=github, clock=clock)


@dataclass(frozen=True)
class _ChatGitHub:
    """What Chat does with GitHub: its intents' policy, the focused issue, the checkouts."""

    policy: IntentPolicy
    issues: IssueContextLoader | None = None
    checkouts: ManagedCheckouts | None = None


def _task_reader(database: dbmod.Database) -> TaskReader:
    """Chat's reads of the task lifecycle: the board's views, one transaction each."""
    return TaskReader(
        focused=lambda repo, issue: database.run(focused_task, repo, issue),
        left=lambda repo, issue: database.run(pull_left, repo, issue),
    )


def _chat_github(
    settings: Settings,
    database: dbmod.Database,
    github: GitHubClient | None,
    filing: FilingService | None,
    publisher: DecisionPublisher | None,
    memory: Memory,
) -> _ChatGitHub:
    """With a GitHub App, Chat's filing intents file for real (still only on request), its
    focused issue is read from GitHub and its checkouts are kept fresh; without one, Chat
    only drafts, and the operator's commands still answer from the records (a task's
    state; "publish it" says it cannot) and forget from session memory."""
    if github is None or filing is None or publisher is None:
        return _ChatGitHub(
            policy=OperatorCommands(
                DraftOnlyPolicy(),
                tasks=_task_reader(database),
                publisher=None,
                memory=memory,
                db=database,
            )
        )
    return _ChatGitHub(
        # The operator's typed commands ("publish it", ...) first, then the filing policy.
        policy=OperatorCommands(
            GitHubIntentPolicy(filing),
            tasks=_task_reader(database),
            publisher=publisher,
            memory=memory,
            db=database,
        ),
        issues=IssueContextLoader(github),
        checkouts=ManagedCheckouts(
            settings.data_dir / "checkouts",
            github,
            refresh_seconds=settings.checkout_refresh_seconds,
        ),
    )
