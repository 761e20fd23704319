"""The composition root of the web service: the one place its parts are built.

Web: `web_composition` is the app's first `cleanup_ctx`. At start-up it builds the process's
parts (`steelframe.parts.build_parts`), then each shell's dependency object whole
(`operator_api.deps.OperatorApi`, `webhooks.deps.Webhooks`, `web_gui.deps.Gui`) under its
typed app key, starts what runs in the background, and at exit stops it all in reverse and
closes the parts. Handlers reach only their own shell's object.

The worker's own root is `steelframe.worker_context`, apart so that a worker process does not
import the web shells it never serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

from aiohttp import web

from bot.clock import utcnow
from bot.config import DEFAULT_WEBHOOK_MAX_BODY, Settings
from bot.db import first_reads
from bot.executors import start_default_executor
from bot.lifecycle.context import LifecyclePolicy
from http_edge.appkeys import DIRECT_ROUTES, LANE_ROUTES, UNANSWERED
from http_edge.credentials import AUTH_THROTTLE, auth_throttle
from operator_api.deps import OPERATOR_API, OperatorApi
from operator_api.tokens import TokenCache
from steelframe.parts import PARTS, Parts, build_parts
from steelframe.worker_context import lifecycle_redactor
from web_gui.deps import GUI, Gui
from webhooks import routes as webhook_routes
from webhooks.deps import WEBHOOKS, Webhooks
from webhooks.memory_sink import MemorySink
from webhooks.metrics import delivery_collector
from webhooks.processor import DeliveryProcessor
from webhooks.receiver import Receiver
from webhooks.router import build_router
from webhooks.routing import WebhookContext
from webhooks.writer import DeliveryWriter

log = logging.getLogger(__name__)
BACKGROUND_STOP_SECONDS = 5.0
# Let the webhook batch in hand finish at exit; what is left stays `received` for the next start.
SHUTDOWN_DRAIN_SECONDS = 5.0
CleanupContext = Callable[[web.Application], AsyncIterator[None]]


def web_composition(settings: Settings, **overrides: Any) -> CleanupContext:
    """The web app's composition, as a cleanup context; `overrides` go to `build_parts`
    (`runtimes=`, `clock=`, `migrate=`)."""

    async def compose(app: web.Application) -> AsyncIterator[None]:
        start_thread_pools(asyncio.get_running_loop())
        parts = build_parts(settings, **overrides)
        app[PARTS] = parts
        app[UNANSWERED] = parts.unanswered
        app[AUTH_THROTTLE] = throttle = auth_throttle(settings)
        app[OPERATOR_API] = operator_api(parts)
        app[GUI] = Gui(settings=settings, db=parts.db)
        hooks = app[WEBHOOKS] = webhooks(parts)
        _serve_webhooks_early(app, hooks.receiver)
        try:
            async with _running_webhooks(parts, hooks), _running_chat(parts):
                yield
        finally:
            await throttle.close()
            await parts.close()

    return compose


def start_thread_pools(loop: asyncio.AbstractEventLoop) -> None:
    """Every thread pool the loop hands work to, with all its threads running, before the
    app serves: the loop's default executor (`asyncio.to_thread`, `Database.run`) and the
    first reads' pool (`Database.run_first`); the webhook connections' SQLite thread starts
    when the writer and processor are built, below. A pool that started its threads lazily
    did so on the loop, inside a request, and a loaded machine held the loop for seconds
    per `Thread.start` (bot/executors.py)."""
    start_default_executor(loop)
    first_reads()


def operator_api(parts: Parts) -> OperatorApi:
    return OperatorApi(
        settings=parts.settings,
        db=parts.db,
        chat_turns=parts.chat_turns,
        chat_sessions=parts.chat_sessions,
        registry=parts.registry,
        events=parts.events,
        metrics=parts.metrics,
        readiness=parts.readiness,
        tokens=TokenCache(parts.db),
        clock=parts.clock,
        terminations=parts.lifecycle.terminations if parts.lifecycle else None,
        filing=parts.filing,
        publisher=parts.publisher,
    )


def webhooks(parts: Parts) -> Webhooks:
    settings, lifecycle = parts.settings, parts.lifecycle
    router = build_router()
    # Read here, once: the environment this process started with (as its settings were).
    # The same redactor masks what memory stores from webhooks (the secrets this service
    # knows, beside the token shapes memory masks by itself).
    redactor = lifecycle_redactor(settings, LifecyclePolicy.from_settings(settings), os.environ)
    ctx = WebhookContext(
        db=parts.db,
        settings=settings,
        clock=utcnow,
        github=parts.github,
        chunks=MemorySink(redactor=redactor),
        pickups=lifecycle.pickups if lifecycle else None,
        resumes=lifecycle.resumes if lifecycle else None,
        terminations=lifecycle.terminations if lifecycle else None,
        queue=lifecycle.queue if lifecycle else None,
        checkouts=parts.chat_turns.checkouts,
        redactor=redactor,
    )
    writer = DeliveryWriter(parts.db)
    processor = DeliveryProcessor(router, ctx, writer=writer)
    secret = settings.webhook_secret.reveal() if settings.webhook_secret else None
    receiver = Receiver(
        secret=secret,
        router=router,
        writer=writer,
        processor=processor,
        clock=utcnow,
        max_body=DEFAULT_WEBHOOK_MAX_BODY,
    )
    parts.metrics.add_collector(delivery_collector(parts.db, utcnow))
    return Webhooks(db=parts.db, receiver=receiver, processor=processor, writer=writer)


def _serve_webhooks_early(app: web.Application, receiver: Receiver) -> None:
    """The webhook route, served before URL dispatch and middlewares as well
    (steelframe.direct_routes) and, in its usual shape, before aiohttp's request machinery
    (steelframe.lanes). Both are read when the server is made, after start-up."""
    direct = webhook_routes.direct_handler(receiver)
    app.setdefault(DIRECT_ROUTES, {})[("POST", webhook_routes.PATH)] = direct
    lane = webhook_routes.WebhookLane(receiver)
    app.setdefault(LANE_ROUTES, {})[lane.request_line] = lane


@contextlib.asynccontextmanager
async def _running_webhooks(parts: Parts, hooks: Webhooks) -> AsyncIterator[None]:
    hooks.processor.start()  # its first sweep processes what a previous run left behind
    if parts.github is not None:
        parts.background.spawn(_load_identity(parts), name="github-identity")
    try:
        yield
    finally:
        await hooks.writer.close()
        with contextlib.suppress(TimeoutError):
            # Not a retry still to fall due: it is stored, for the next sweep that finds it due.
            drained = hooks.processor.drain(retries_within=0.0)
            await asyncio.wait_for(drained, SHUTDOWN_DRAIN_SECONDS)
        await hooks.processor.close()


async def _load_identity(parts: Parts) -> None:
    assert parts.github is not None
    try:
        identity = await parts.github.identity()
        log.info("GitHub App %s (%s)", identity.slug, identity.bot_login)
    except Exception as exc:  # the service runs without it; calls that need it retry
        log.warning("could not load the GitHub App's identity: %s", exc)


@contextlib.asynccontextmanager
async def _running_chat(parts: Parts) -> AsyncIterator[None]:
    turns, sessions = parts.chat_turns, parts.chat_sessions
    await sessions.resume_pending_summaries()
    # Turns a process killed mid-turn left acknowledged (`dev` killed with kill -9): noted
    # in their sessions as cut, before anything is served (bot/chat/left_turns.py).
    await turns.note_left_turns()
    # Stops published by other instances (POST .../stop landed elsewhere) end turns here;
    # their forgets take the words out of the frames this process holds.
    listener = asyncio.create_task(
        turns.locks.run_listener(parts.registry.stop, turns.frames_forgotten)
    )
    # Sessions left open and forgotten are summarised too (docs/api.md, "Sessions").
    sweeper = asyncio.create_task(
        sessions.summaries.run_idle_sweeps(
            idle=timedelta(seconds=parts.settings.summary_idle_seconds), clock=sessions.clock
        )
    )
    # Turns another instance's kill left open, noted while this one runs, and the forgets'
    # words they owed let go (bot/chat/turn_ends.py, `run_left_turn_sweeps`).
    left = asyncio.create_task(turns.ends.run_left_turn_sweeps())
    try:
        yield
    finally:
        for task in (listener, sweeper, left):
            task.cancel()
        # Bounded: shutdown must not hang on a background task stuck in a Redis read.
        done, stuck = await asyncio.wait({listener, sweeper, left}, timeout=BACKGROUND_STOP_SECONDS)
        for task in stuck:
            log.warning("%s did not end within %ss", task.get_coro(), BACKGROUND_STOP_SECONDS)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.warning("%s failed: %s", task.get_coro(), task.exception())
