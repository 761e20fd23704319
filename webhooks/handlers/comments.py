"""`issue_comment` created/edited: the comment's text in memory, with its issue and author
(an edit replaces the earlier text: the chunk ref is the comment id)."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from webhooks.chunks import ChunkSource, GitHubText
from webhooks.handlers.common import (
    REPO_NEEDS,
    github_time,
    log,
    login_of,
    remember_text,
)
from webhooks.routing import WebhookContext, handles

router = Router()
NEEDS: dict[str, type] = {
    **REPO_NEEDS,
    "issue.number": int,
    "comment.id": int,
    "comment.body": str,
}


async def on_comment(event: Event, ctx: WebhookContext) -> None:
    comment = event.data["comment"]
    repo = str(event.data["repository"]["full_name"])
    number = int(event.data["issue"]["number"])
    await remember_text(
        event,
        ctx,
        GitHubText(
            source=ChunkSource.COMMENT,
            ref=f"comment:{comment['id']}",
            repo=repo,
            issue=number,
            text=str(comment["body"]),
            author=login_of(comment.get("user")),
            url=comment.get("html_url"),
            created_at=github_time(comment.get("created_at"), ctx.clock()),
        ),
    )
    log.info(
        "issue_comment.%s %s#%s comment %s [%s]",
        event.data.get("action"),
        repo,
        number,
        comment["id"],
        event.delivery_id,
    )


handles(router, "issue_comment", action="created", needs=NEEDS)(on_comment)
handles(router, "issue_comment", action="edited", needs=NEEDS)(on_comment)
