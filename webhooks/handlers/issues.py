"""`issues`: keep the repository known and the issue's text in memory (title and body,
with provenance), refreshed on every change so retrieval sees the current text (an older
edit delivered after a newer one keeps the newer: the issue's `updated_at`); deleted or
transferred to another repository: forgotten here, with its comments
(memory.chunks.retract_issue), so no answer quotes it any more."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

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
ACTIONS = ("opened", "edited", "labeled", "unlabeled", "closed", "reopened")
# Gone from this repository: deleted, or moved to another (`changes.new_repository`; the
# new one sends its own `issues.opened`, remembered there if the App is installed there).
GONE = ("deleted", "transferred")
NEEDS: dict[str, type] = {**REPO_NEEDS, "issue.number": int, "issue.title": str}
GONE_NEEDS: dict[str, type] = {**REPO_NEEDS, "issue.number": int}


def issue_ref(repo: str, number: int) -> str:
    return f"issue:{repo}#{number}"


def issue_text(event: Event, ctx: WebhookContext) -> GitHubText:
    issue = event.data["issue"]
    repo = str(event.data["repository"]["full_name"])
    number = int(issue["number"])
    body = issue.get("body") or ""
    updated = issue.get("updated_at")
    return GitHubText(
        source=ChunkSource.ISSUE,
        ref=issue_ref(repo, number),
        repo=repo,
        issue=number,
        text=f"#{number} {issue['title']}\n\n{body}".strip(),
        author=login_of(issue.get("user")),
        url=issue.get("html_url"),
        created_at=github_time(issue.get("created_at"), ctx.clock()),
        updated_at=github_time(updated, ctx.clock()) if isinstance(updated, str) else None,
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


async def on_issue_gone(event: Event, ctx: WebhookContext) -> None:
    repo = str(event.data["repository"]["full_name"])
    number = int(event.data["issue"]["number"])
    await forget_text(event, ctx, issue_ref(repo, number))
    log.info(
        "issues.%s %s#%s forgotten with its comments [%s]",
        event.data.get("action"),
        repo,
        number,
        event.delivery_id,
    )


for _action in ACTIONS:
    handles(router, "issues", action=_action, needs=NEEDS)(on_issue)
for _action in GONE:
    handles(router, "issues", action=_action, needs=GONE_NEEDS)(on_issue_gone)
