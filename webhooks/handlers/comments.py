"""`issue_comment` created/edited: the comment's text in memory, with its issue and author
(an edit replaces the earlier text: the chunk ref is the comment id; an older edit delivered
after a newer one keeps the newer: the comment's `updated_at`), unless it is Steelframe's
own progress comment or notice; deleted: forgotten, every version of its text
(memory.chunks.retract), so no answer quotes it any more."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from bot.markers import opens_as_status
from webhooks.chunks import ChunkSource, GitHubText
from webhooks.handlers.common import (
    REPO_NEEDS,
    forget_text,
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
    updated = comment.get("updated_at")
    text, author = str(comment["body"]), login_of(comment.get("user"))
    await remember_text(
        event,
        ctx,
        GitHubText(
            source=ChunkSource.COMMENT,
            ref=f"comment:{comment['id']}",
            repo=repo,
            issue=number,
            text=text,
            author=author,
            url=comment.get("html_url"),
            created_at=github_time(comment.get("created_at"), ctx.clock()),
            updated_at=github_time(updated, ctx.clock()) if isinstance(updated, str) else None,
            app_status=await _app_status(ctx, text, author),
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


async def _app_status(ctx: WebhookContext, text: str, author: str | None) -> bool:
    """Whether the comment is Steelframe's own progress comment or notice: laid out as one
    and written by the App. Anyone can type a marker: a person's marked comment is theirs
    (docs/lifecycle.md). The App's login is asked for only of a comment laid out so."""
    if not opens_as_status(text) or author is None or ctx.github is None:
        return False
    return await ctx.github.is_app_login(author)


async def on_comment_deleted(event: Event, ctx: WebhookContext) -> None:
    comment_id = int(event.data["comment"]["id"])
    await forget_text(event, ctx, f"comment:{comment_id}")
    log.info("issue_comment.deleted comment %s forgotten [%s]", comment_id, event.delivery_id)


handles(router, "issue_comment", action="created", needs=NEEDS)(on_comment)
handles(router, "issue_comment", action="edited", needs=NEEDS)(on_comment)
handles(router, "issue_comment", action="deleted", needs={**REPO_NEEDS, "comment.id": int})(
    on_comment_deleted
)
