"""The composition root of the web service: one aiohttp app from the per-concern packages.

The entry package is the only one that imports every other; `bot` stays free of HTTP.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from aiohttp import web

from bot.appkeys import SERVICES
from bot.config import DEFAULT_WEBHOOK_MAX_BODY, Settings
from bot.services import Services, build_services
from operator_api import (
    board_routes,
    chat_routes,
    decision_routes,
    events_routes,
    meta_routes,
    metrics_routes,
)
from operator_api.auth import (
    AUTH_THROTTLE,
    TOKEN_CACHE,
    TokenCache,
    auth_middleware,
    auth_throttle,
)
from operator_api.middleware import errors_middleware, on_response_prepare
from operator_api.openapi import OPENAPI_DOCUMENT, build_document
from steelframe.dev_tokens import DEV_TOKENS_ACCEPTED, refuse_dev_tokens
from steelframe.protocol_log import QuietProtocolLog
from web_gui import OPENAPI_PATHS as GUI_PATHS
from web_gui import setup as web_gui_setup
from webhooks import OPENAPI_PATHS as WEBHOOK_PATHS
from webhooks import setup as webhooks_setup

log = logging.getLogger(__name__)
BACKGROUND_STOP_SECONDS = 5.0
# The operator API's route tables; each also declares its endpoints' OpenAPI operations.
OPERATOR_API = (
    meta_routes,
    metrics_routes,
    chat_routes,
    board_routes,
    decision_routes,
    events_routes,
)


@dataclass(frozen=True)
class AppPlugin:
    """An optional part of the service (the webhook route...): its set-up step, which takes
    the app and its services, and the paths it adds to the API description."""

    setup: Callable[[web.Application, Services], None]
    openapi_paths: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def create_app(
    settings: Settings,
    *,
    services: Services | None = None,
    plugins: tuple[AppPlugin, ...] | None = None,
    accept_dev_tokens: bool = False,
    **service_overrides: Any,
) -> web.Application:
    # Only `steelframe dev` accepts the tokens it mints (steelframe/dev_tokens.py).
    dev_tokens = [] if accept_dev_tokens else [refuse_dev_tokens]
    # The largest body any route accepts is a GitHub webhook (25 MB); chat routes enforce
    # their own much lower cap while reading.
    app = web.Application(
        middlewares=[errors_middleware, *dev_tokens, auth_middleware],
        client_max_size=DEFAULT_WEBHOOK_MAX_BODY,
        # A request aiohttp cannot parse (header line over 8 KB...) is a 400 and one log line.
        handler_args={"logger": QuietProtocolLog()},
    )
    for module in OPERATOR_API:
        app.add_routes(module.endpoints.routes)
    app[DEV_TOKENS_ACCEPTED] = accept_dev_tokens
    owned = services is None
    built = services or build_services(settings, **service_overrides)
    app[SERVICES] = built
    app[TOKEN_CACHE] = TokenCache(built.db)
    app[AUTH_THROTTLE] = throttle = auth_throttle(settings)
    app.on_cleanup.append(lambda _: throttle.close())
    app.on_response_prepare.append(on_response_prepare)
    chosen = plugins if plugins is not None else default_plugins()
    for plugin in chosen:
        plugin.setup(app, built)
    # One document per app, built once from the declarations of what this app serves.
    app[OPENAPI_DOCUMENT] = build_document(
        [*(m.endpoints.paths for m in OPERATOR_API), *(p.openapi_paths for p in chosen)]
    )

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        await built.chat_sessions.resume_pending_summaries()
        # Stops published by other instances (POST .../stop landed elsewhere) end turns here.
        listener = asyncio.create_task(
            built.chat_turns.locks.run_stop_listener(built.registry.stop)
        )
        # Sessions left open and forgotten are summarised too (docs/api.md, "Sessions").
        sweeper = asyncio.create_task(
            built.chat_sessions.summaries.run_idle_sweeps(
                idle=timedelta(seconds=settings.summary_idle_seconds),
                clock=built.chat_sessions.clock,
            )
        )
        yield
        for task in (listener, sweeper):
            task.cancel()
        # Bounded: shutdown must not hang on a background task stuck in a Redis read.
        done, stuck = await asyncio.wait({listener, sweeper}, timeout=BACKGROUND_STOP_SECONDS)
        for task in stuck:
            log.warning("%s did not end within %ss", task.get_coro(), BACKGROUND_STOP_SECONDS)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.warning("%s failed: %s", task.get_coro(), task.exception())
        if owned:
            await built.close()

    app.cleanup_ctx.append(lifecycle)
    return app


def default_plugins() -> tuple[AppPlugin, ...]:
    """The optional parts of the service; each package adds its own `setup` here."""
    return (AppPlugin(webhooks_setup, WEBHOOK_PATHS), AppPlugin(web_gui_setup, GUI_PATHS))
