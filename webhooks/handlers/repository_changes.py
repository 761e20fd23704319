"""`push` and a merged `pull_request`: the repository changed, so Chat's managed clone of it
(bot/checkouts.py) is refreshed before the next turn; a merged memory PR is then in
that turn's committed memory."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from webhooks.handlers.common import log
from webhooks.routing import WebhookContext, handles

router = Router()
NEEDS: dict[str, type] = {"repository.full_name": str}


@handles(router, "push", needs=NEEDS)
async def on_push(event: Event, ctx: WebhookContext) -> None:
    _changed(event, ctx, "push")


@handles(router, "pull_request", action="closed", needs=NEEDS)
async def on_pull_merged(event: Event, ctx: WebhookContext) -> None:
    if (event.data.get("pull_request") or {}).get("merged"):
        _changed(event, ctx, "merge")


def _changed(event: Event, ctx: WebhookContext, why: str) -> None:
    repo = str(event.data["repository"]["full_name"])
    if ctx.checkouts is not None:
        ctx.checkouts.mark_stale(repo)
    log.info(
        "%s on %s: Chat's checkout refreshes before its next turn [%s]",
        why,
        repo,
        event.delivery_id,
    )
