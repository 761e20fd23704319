"""`pull_request` opened/closed: the pull request's text in memory; closing is logged
(the lifecycle hooks react to merges)."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from webhooks.chunks import ChunkSource, GitHubText
from webhooks.handlers.common import (
    REPO_NEEDS,
    commit,
    github_time,
    log,
    login_of,
    remember_text,
    repository_write,
)
from webhooks.routing import WebhookContext, handles

router = Router()
NEEDS: dict[str, type] = {**REPO_NEEDS, "pull_request.number": int, "pull_request.title": str}


@handles(router, "pull_request", action="opened", needs=NEEDS)
async def on_pull_opened(event: Event, ctx: WebhookContext) -> None:
    pull = event.data["pull_request"]
    repo = str(event.data["repository"]["full_name"])
    number = int(pull["number"])
    body = pull.get("body") or ""
    await remember_text(
        event,
        ctx,
        GitHubText(
            source=ChunkSource.PULL_REQUEST,
            ref=f"pull:{repo}#{number}",
            repo=repo,
            issue=number,
            text=f"PR #{number} {pull['title']}\n\n{body}".strip(),
            author=login_of(pull.get("user")),
            url=pull.get("html_url"),
            created_at=github_time(pull.get("created_at"), ctx.clock()),
        ),
    )
    log.info("pull_request.opened %s#%s [%s]", repo, number, event.delivery_id)


@handles(router, "pull_request", action="closed", needs=NEEDS)
async def on_pull_closed(event: Event, ctx: WebhookContext) -> None:
    pull = event.data["pull_request"]
    await commit(ctx, [repository_write(event, ctx)])
    log.info(
        "pull_request.closed %s#%s merged=%s [%s]",
        event.data["repository"]["full_name"],
        pull["number"],
        bool(pull.get("merged")),
        event.delivery_id,
    )
