"""`ping`: GitHub's hello when the webhook is created; nothing to do but say so."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from webhooks.handlers.common import log
from webhooks.routing import WebhookContext, handles

router = Router()


@handles(router, "ping")
async def on_ping(event: Event, ctx: WebhookContext) -> None:
    hook = event.data.get("hook") or {}
    log.info("ping %s: hook %s, app %s", event.delivery_id, hook.get("id"), hook.get("app_id"))
