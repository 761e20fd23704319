"""`issues`: keep the repository known and the issue's text in memory (title and body,
with provenance), refreshed on every change so retrieval sees the current text."""

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
ACTIONS = ("opened", "edited", "labeled", "unlabeled", "closed", "reopened")
NEEDS: dict[str, type] = {**REPO_NEEDS, "issue.number": int, "issue.title": str}


def issue_text(event: Event, ctx: WebhookContext) -> GitHubText:
    issue = event.data["issue"]
    repo = str(event.data["repository"]["full_name"])
    number = int(issue["number"])
    body = issue.get("body") or ""
    return GitHubText(
        source=ChunkSource.ISSUE,
        ref=f"issue:{repo}#{number}",
        repo=repo,
        issue=number,
        text=f"#{number} {issue['title']}\n\n{body}".strip(),
        author=login_of(issue.get("user")),
        url=issue.get("html_url"),
        created_at=github_time(issue.get("created_at"), ctx.clock()),
    )


async def on_issue(event: Event, ctx: WebhookContext) -> None:
    await remember_text(event, ctx, issue_text(event, ctx))
    log.info(
        "issues.%s %s#%s [%s]",
        event.data.get("action"),
        event.data["repository"]["full_name"],
        event.data["issue"]["number"],
        event.delivery_id,
    )


for _action in ACTIONS:
    handles(router, "issues", action=_action, needs=NEEDS)(on_issue)
