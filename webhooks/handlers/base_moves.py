"""A base branch moved: a `push` to a branch, or a pull request merged into one. Each
delivered task's open pull request into that branch is read, and one that now conflicts
gets an update run or a person asked (bot.lifecycle.base_intake). A mergeability GitHub
has not computed yet raises, so the delivery is retried later; the claim per (task, base
commit, head commit) makes every redelivery change nothing."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from bot.lifecycle.base_intake import BaseUpdates
from webhooks.handlers.common import log
from webhooks.routing import WebhookContext, handles

router = Router()
REPO: dict[str, type] = {"repository.full_name": str}
BRANCH_PREFIX = "refs/heads/"


@handles(router, "push", needs={**REPO, "ref": str})
async def on_base_pushed(event: Event, ctx: WebhookContext) -> None:
    ref = str(event.data["ref"])
    if not ref.startswith(BRANCH_PREFIX) or event.data.get("deleted"):
        return  # a tag, or a branch deleted: no pull request's base moved
    await _base_moved(event, ctx, ref.removeprefix(BRANCH_PREFIX))


@handles(router, "pull_request", action="closed", needs={**REPO, "pull_request.base.ref": str})
async def on_merged_into_base(event: Event, ctx: WebhookContext) -> None:
    pull = event.data["pull_request"]
    if pull.get("merged"):
        await _base_moved(event, ctx, str(pull["base"]["ref"]))


async def _base_moved(event: Event, ctx: WebhookContext, base_ref: str) -> None:
    if ctx.queue is None or ctx.github is None:
        log.info("base moved [%s] ignored: no lifecycle here", event.delivery_id)
        return
    updates = BaseUpdates(
        db=ctx.db,
        github=ctx.github,
        queue=ctx.queue,
        update_runs=ctx.settings.base_update_runs,
        clock=ctx.clock,
    )
    repo = str(event.data["repository"]["full_name"])
    outcomes = await updates.on_base_moved(repo, base_ref)
    acted = [o for o in outcomes if o.verdict in ("update run", "needs human")]
    log.info(
        "base %s of %s moved [%s]: %d task(s) read, %d acted on",
        base_ref,
        repo,
        event.delivery_id,
        len(outcomes),
        len(acted),
    )
