"""GitHub webhooks: the signed endpoint, the durable delivery log, and the event router.

`setup(app, services)` is the web service's plugin and `OPENAPI_PATHS` its part of the API
description (see `steelframe.server.default_plugins`, which composes both).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from bot.appkeys import DIRECT_ROUTES, LANE_ROUTES
from bot.clock import utcnow
from bot.config import DEFAULT_WEBHOOK_MAX_BODY
from bot.services import Services
from webhooks.operator_routes import OPENAPI_PATHS as OPERATOR_PATHS

log = logging.getLogger("steelframe.webhooks")
SHUTDOWN_DRAIN_SECONDS = 5.0


def setup(app: web.Application, services: Services) -> None:
    from webhooks import operator_routes, routes
    from webhooks.appkeys import PROCESSOR, RECEIVER
    from webhooks.memory_sink import MemorySink
    from webhooks.metrics import delivery_collector
    from webhooks.processor import DeliveryProcessor
    from webhooks.receiver import Receiver
    from webhooks.router import build_router
    from webhooks.routing import WebhookContext
    from webhooks.writer import DeliveryWriter

    settings = services.settings
    router = build_router()
    ctx = WebhookContext(
        db=services.db,
        settings=settings,
        clock=utcnow,
        github=services.github,
        chunks=MemorySink(),
        tasks=services.tasks,
        checkouts=services.chat_turns.checkouts,
    )
    writer = DeliveryWriter(services.db)
    processor = DeliveryProcessor(router, ctx, writer=writer)
    secret = settings.webhook_secret.reveal() if settings.webhook_secret else None
    app[RECEIVER] = Receiver(
        secret=secret,
        router=router,
        writer=writer,
        processor=processor,
        clock=utcnow,
        max_body=DEFAULT_WEBHOOK_MAX_BODY,
    )
    app[PROCESSOR] = processor
    services.metrics.add_collector(delivery_collector(services.db, utcnow))
    app.add_routes(routes.routes)
    # Served before URL dispatch and middlewares as well (steelframe.direct_routes).
    app.setdefault(DIRECT_ROUTES, {})[("POST", routes.PATH)] = routes.direct_handler(app[RECEIVER])
    # And, in its usual shape, before aiohttp's request machinery (steelframe.lanes).
    lane = routes.WebhookLane(app[RECEIVER])
    app.setdefault(LANE_ROUTES, {})[lane.request_line] = lane
    app.add_routes(operator_routes.routes)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        processor.start()  # its first sweep processes what a previous run left behind
        if services.github is not None:
            services.background.spawn(_load_identity(services), name="github-identity")
        yield
        await writer.close()
        # Let the batch in hand finish; what is left stays `received` for the next start.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(processor.drain(), SHUTDOWN_DRAIN_SECONDS)
        await processor.close()

    app.cleanup_ctx.append(lifecycle)


async def _load_identity(services: Services) -> None:
    assert services.github is not None
    try:
        identity = await services.github.identity()
        log.info("GitHub App %s (%s)", identity.slug, identity.bot_login)
    except Exception as exc:  # the service runs without it; calls that need it retry
        log.warning("could not load the GitHub App's identity: %s", exc)


# The document's shared error shape (the composition root supplies the components).
_ERROR = {"$ref": "#/components/schemas/Error"}


def _answer(description: str) -> dict[str, object]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR}}}


def _ack(description: str, *statuses: str) -> dict[str, object]:
    status = {"const": statuses[0]} if len(statuses) == 1 else {"enum": list(statuses)}
    schema = {
        "type": "object",
        "required": ["delivery", "status"],
        "additionalProperties": False,
        "properties": {"delivery": {"type": "string"}, "status": status},
    }
    return {"description": description, "content": {"application/json": {"schema": schema}}}


OPENAPI_OPERATION = {
    "summary": "GitHub webhook deliveries (signed with WEBHOOK_SECRET)",
    "description": "Stored durably before the answer; processed after it. Authenticated by "
    "X-Hub-Signature-256, not by an operator token.",
    "parameters": [
        {"name": name, "in": "header", "required": True, "schema": {"type": "string"}}
        for name in ("X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256")
    ],
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
    "responses": {
        "202": _ack(
            "Stored; will be processed (`accepted`), or an earlier delivery's content under a "
            "new delivery id, stored and never processed (`replayed`)",
            "accepted",
            "replayed",
        ),
        "200": _ack("A redelivery of a stored delivery; not processed again", "duplicate"),
        "400": _answer("Malformed payload or headers; stored as rejected with the reason"),
        "401": _answer("Missing or wrong signature; nothing stored"),
        "408": _answer("The body stopped arriving for 30 s; nothing stored"),
        "413": _answer("Body over 25 MB"),
        "503": _answer(
            "Not configured, the delivery could not be stored, or too many bodies are being "
            "read at once (Retry-After says when to come back)"
        ),
    },
}
# routes.PATH, spelled out: importing webhooks.routes here would load the receiver stack
# for every importer of this package. The delivery log's operator paths come with it.
OPENAPI_PATHS = {"/api/github/webhooks": {"post": OPENAPI_OPERATION}, **OPERATOR_PATHS}
