"""The web service's app: routes, middlewares and the API description, with the composition
root (`steelframe.composition`) as its first cleanup context.

The entry package is the only one that imports every other; `bot` stays free of HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.config import DEFAULT_WEBHOOK_MAX_BODY, Settings
from http_edge.answers import on_response_prepare
from http_edge.errors import errors_middleware
from http_edge.expect import answer_expect_on_every_route
from operator_api import (
    board_routes,
    chat_routes,
    decision_routes,
    events_routes,
    meta_routes,
    metrics_routes,
    open_streams,
    spend_routes,
)
from operator_api.auth import auth_middleware
from operator_api.openapi import OPENAPI_DOCUMENT, build_document
from steelframe.composition import web_composition
from steelframe.dev_tokens import DEV_TOKENS_ACCEPTED, refuse_dev_tokens
from steelframe.parts import check_settings
from steelframe.protocol_log import QuietProtocolLog
from web_gui import OPENAPI_PATHS as GUI_PATHS
from web_gui import setup as web_gui_setup
from webhooks import OPENAPI_PATHS as WEBHOOK_PATHS
from webhooks import setup as webhooks_setup

# The operator API's route tables; each also declares its endpoints' OpenAPI operations.
OPERATOR_API = (
    meta_routes,
    metrics_routes,
    chat_routes,
    board_routes,
    decision_routes,
    events_routes,
    spend_routes,  # issue 34: the Dashboard's spend chart
)


@dataclass(frozen=True)
class AppPlugin:
    """An optional part of the service (the webhook route...): its set-up step, which adds
    its routes (its dependencies come from the composition root), and the paths it adds to
    the API description."""

    setup: Callable[[web.Application], None]
    openapi_paths: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def create_app(
    settings: Settings,
    *,
    plugins: tuple[AppPlugin, ...] | None = None,
    accept_dev_tokens: bool = False,
    **overrides: Any,
) -> web.Application:
    """The app; its parts are built at start-up (`steelframe.composition`). `overrides` go
    to `steelframe.parts.build_parts` (`runtimes=`, `clock=`, `migrate=`)."""
    check_settings(settings)  # a bad setting stops start-up here, before anything is opened
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
    app.cleanup_ctx.append(web_composition(settings, **overrides))
    # On shutdown, before aiohttp waits a minute for running handlers: the events streams
    # end, then the chat turns (the watched ones after a grace), each with its terminal
    # frame relayed while the relay is open (it closes with the parts, in cleanup).
    open_streams.setup(app)
    for module in OPERATOR_API:
        app.add_routes(module.endpoints.routes)
    app[DEV_TOKENS_ACCEPTED] = accept_dev_tokens
    app.on_response_prepare.append(on_response_prepare)
    chosen = plugins if plugins is not None else default_plugins()
    for plugin in chosen:
        plugin.setup(app)
    answer_expect_on_every_route(app)  # after every package added its routes
    # One document per app, built once from the declarations of what this app serves.
    app[OPENAPI_DOCUMENT] = build_document(
        [*(m.endpoints.paths for m in OPERATOR_API), *(p.openapi_paths for p in chosen)]
    )
    return app


def default_plugins() -> tuple[AppPlugin, ...]:
    """The optional parts of the service; each package adds its own `setup` here."""
    return (AppPlugin(webhooks_setup, WEBHOOK_PATHS), AppPlugin(web_gui_setup, GUI_PATHS))
