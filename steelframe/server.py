"""The composition root of the web service: one aiohttp app from the per-concern packages.

The entry package is the only one that imports every other; `bot` stays free of HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from bot.appkeys import SERVICES
from bot.config import DEFAULT_WEBHOOK_MAX_BODY, Settings
from bot.services import Services, build_services
from operator_api import board_routes, chat_routes, decision_routes, meta_routes, metrics_routes
from operator_api.auth import TOKEN_CACHE, TokenCache, auth_middleware
from operator_api.middleware import errors_middleware
from steelframe.protocol_log import QuietProtocolLog
from webhooks import setup as webhooks_setup

log = logging.getLogger(__name__)
# Extra set-up steps (the webhook route, the GitHub client, memory...) register here so the
# app factory stays one list: each takes the app and its services.
AppPlugin = Callable[[web.Application, Services], None]


def create_app(
    settings: Settings,
    *,
    services: Services | None = None,
    plugins: tuple[AppPlugin, ...] | None = None,
    **service_overrides: Any,
) -> web.Application:
    # The largest body any route accepts is a GitHub webhook (25 MB); chat routes enforce
    # their own much lower cap while reading.
    app = web.Application(
        middlewares=[errors_middleware, auth_middleware],
        client_max_size=DEFAULT_WEBHOOK_MAX_BODY,
        # A request aiohttp cannot parse (header line over 8 KB...) is a 400 and one log line.
        handler_args={"logger": QuietProtocolLog()},
    )
    app[TOKEN_CACHE] = TokenCache()
    app.add_routes(meta_routes.routes)
    app.add_routes(metrics_routes.routes)
    app.add_routes(chat_routes.routes)
    app.add_routes(board_routes.routes)
    app.add_routes(decision_routes.routes)
    owned = services is None
    built = services or build_services(settings, **service_overrides)
    app[SERVICES] = built
    for plugin in plugins if plugins is not None else default_plugins():
        plugin(app, built)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        await built.chat.resume_pending_summaries()
        # Stops published by other instances (POST .../stop landed elsewhere) end turns here.
        listener = asyncio.create_task(built.chat.locks.run_stop_listener(built.registry.stop))
        yield
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener
        if owned:
            await built.close()

    app.cleanup_ctx.append(lifecycle)
    return app


def default_plugins() -> tuple[AppPlugin, ...]:
    """The optional parts of the service; each package adds its own `setup` here."""
    return (webhooks_setup,)
