"""The place for task-lifecycle reactions to webhooks (pickup labels, Decision comments,
closed issues, merged, closed and reopened pull requests). It is composed into the webhook
router like every other concern.

To react to an event, register a handler on `router` here (or in a module of your own whose
router you add to `webhooks.router.ROUTERS`):

    @handles(router, "issues", action="labeled", needs={"issue.number": int, "label.name": str})
    async def on_pickup_label(event: Event, ctx: WebhookContext) -> None:
        ...

Handlers run after the delivery is stored and acknowledged. Write a handler's database
effect in one transaction that calls `bot.handler_runs.record_done(session)` (or through
`webhooks.handlers.common.commit`): the handler is then recorded as done with its effect,
and a crash never runs it twice. Make GitHub calls idempotent (look up before creating): a
crash between a GitHub call and that commit runs the handler again. `ctx` gives the
database, settings, clock, the GitHub client and the memory sink. `needs` is checked
before acknowledging: a payload without it is answered 400 and stored as rejected, and the
handler never sees it. Comments the App wrote carry
`sender.login == (await ctx.github.identity()).bot_login` - do not drop them blindly: a
Decision comment the App posted must still resume a waiting task.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event

from bot.lifecycle.issue_closed import IssueClosed, stop_for_closed_issue
from bot.lifecycle.pickup import IssueEvent
from bot.lifecycle.pull_end import end_pull, parse_pull_change, reopen_pull
from bot.lifecycle.resume import CommentEvent
from bot.lifecycle.review_pickup import request_review_run
from bot.lifecycle.reviews import ReviewIntake, ReviewPickup
from webhooks.routing import WebhookContext, handles

router = Router()
log = logging.getLogger("steelframe.webhooks")
ISSUE_NEEDS: dict[str, type] = {"repository.full_name": str, "issue.number": int}
PULL_NEEDS: dict[str, type] = {"repository.full_name": str, "pull_request.number": int}
REVIEW_COMMENT_NEEDS: dict[str, type] = {
    **PULL_NEEDS,
    "comment.id": int,
    "comment.body": str,
    "comment.path": str,
    "comment.commit_id": str,
}
REVIEW_NEEDS: dict[str, type] = {**PULL_NEEDS, "review.id": int, "review.state": str}
COMMENT_NEEDS: dict[str, type] = {
    **ISSUE_NEEDS,
    "comment.id": int,
    "comment.body": str,
}


async def on_pickup_label(event: Event, ctx: WebhookContext) -> None:
    """`issues` opened/labeled/reopened with a pickup label: create the task, enqueue it
    (unlabeled: a pickup label's removal makes the next pickup new)."""
    issue_event = parse_issue_event(event.data)
    if ctx.pickups is None:
        starts = issue_event.action in ("opened", "labeled", "reopened")
        if starts and issue_event.names_pickup_label(ctx.settings.pickup_labels):
            log.warning("pickup label on %s ignored: no Redis for the lifecycle", event.delivery_id)
        return
    result = await ctx.pickups.on_issue_event(issue_event)
    if result is not None:
        log.info("pickup [%s]: task %s %s", event.delivery_id, result.task_id, result)


def parse_issue_event(payload: dict[str, Any]) -> IssueEvent:
    """The parts of an `issues` payload the lifecycle reads (ISSUE_NEEDS were checked before
    the handler runs); missing optional fields read as empty."""
    issue = payload.get("issue") or {}
    label = payload.get("label")
    return IssueEvent(
        action=str(payload.get("action") or ""),
        repo=str(payload["repository"]["full_name"]),
        number=int(issue["number"]),
        title=str(issue.get("title") or ""),
        body=str(issue.get("body") or ""),
        sender=str((payload.get("sender") or {}).get("login") or ""),
        labels=tuple(
            str(each.get("name")) for each in issue.get("labels") or [] if isinstance(each, dict)
        ),
        label=str(label.get("name") or "") if isinstance(label, dict) else None,
        is_pull_request="pull_request" in issue,
        updated_at=_github_time(issue.get("updated_at")),
    )


def _github_time(value: object) -> datetime | None:
    """An ISO 8601 time as GitHub writes it (`2030-01-01T00:00:00Z`), or None."""
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


async def on_decision_comment(event: Event, ctx: WebhookContext) -> None:
    """`issue_comment` created carrying `<!-- steelframe-decision -->` (the App's own
    included): resume the waiting task if the author may decide."""
    if ctx.resumes is None:
        return
    result = await ctx.resumes.on_comment_event(parse_comment_event(event.data))
    if result is not None:
        log.info("decision [%s]: task %s %s", event.delivery_id, result.task_id, result.reason)


def parse_comment_event(payload: dict[str, Any]) -> CommentEvent:
    """The parts of an `issue_comment` payload the lifecycle reads (COMMENT_NEEDS were
    checked before the handler runs); a missing author reads as empty."""
    comment = payload.get("comment") or {}
    return CommentEvent(
        action=str(payload.get("action") or ""),
        repo=str(payload["repository"]["full_name"]),
        issue=int(payload["issue"]["number"]),
        comment_id=int(comment["id"]),
        author=str((comment.get("user") or {}).get("login") or ""),
        body=str(comment.get("body") or ""),
    )


async def on_issue_closed(event: Event, ctx: WebhookContext) -> None:
    """`issues` closed: the issue's live task is terminated (bot.lifecycle.issue_closed)."""
    if ctx.terminations is None:
        return
    closed = IssueClosed(
        repo=str(event.data["repository"]["full_name"]),
        issue=int(event.data["issue"]["number"]),
        closed_by=str((event.data.get("sender") or {}).get("login") or ""),
    )
    task_id = await stop_for_closed_issue(ctx.db, ctx.github, ctx.terminations, closed)
    if task_id is not None:
        log.info("issue closed [%s]: task %s terminated", event.delivery_id, task_id)


async def on_pull_closed(event: Event, ctx: WebhookContext) -> None:
    """`pull_request` closed: a task's pull request merged -> `merged`, else `closed`."""
    closed = parse_pull_change(event.data)
    by_app = ctx.github is not None and await ctx.github.is_app_login(closed.author)
    await end_pull(ctx.db, ctx.github, closed, opened_by_app=by_app, clock=ctx.clock)


async def on_pull_reopened(event: Event, ctx: WebhookContext) -> None:
    """`pull_request` reopened: a task `closed` by its pull request's close is back as the
    close found it, and the review threads a run it stopped held get a review run."""
    reopened = parse_pull_change(event.data)
    by_app = ctx.github is not None and await ctx.github.is_app_login(reopened.author)
    done = await reopen_pull(ctx.db, ctx.github, reopened, opened_by_app=by_app, clock=ctx.clock)
    if done.moved is not None and done.task_id is not None:  # threads may wait (none: no run)
        await request_review_run(ctx.db, ctx.github, ctx.queue, done.task_id, clock=ctx.clock)


async def on_review_comment(event: Event, ctx: WebhookContext) -> None:
    """`pull_request_review_comment` created on a task's pull request: `eyes` at once and
    the thread in the ledger, if a person with write access wrote it."""
    intake = ReviewIntake(db=ctx.db, github=ctx.github, clock=ctx.clock)
    result = await intake.on_review_comment(event.data)
    log.debug("review comment [%s]: %s", event.delivery_id, result.reason)
    await _ask_review_run(ctx, result)


async def on_review_submitted(event: Event, ctx: WebhookContext) -> None:
    """`pull_request_review` submitted with text: acknowledged, recorded in the ledger."""
    intake = ReviewIntake(db=ctx.db, github=ctx.github, clock=ctx.clock)
    result = await intake.on_review(event.data)
    log.debug("review [%s]: %s", event.delivery_id, result.reason)
    await _ask_review_run(ctx, result)


async def on_review_dismissed(event: Event, ctx: WebhookContext) -> None:
    """`pull_request_review` dismissed: its thread withdrawn if no run took it up yet."""
    intake = ReviewIntake(db=ctx.db, github=ctx.github, clock=ctx.clock)
    result = await intake.on_review_dismissed(event.data)
    log.debug("review dismissed [%s]: %s", event.delivery_id, result.reason)


async def on_review_comment_changed(event: Event, ctx: WebhookContext) -> None:
    """`pull_request_review_comment` edited or deleted: a thread no run took up yet is
    brought up to date (its text, or declined)."""
    intake = ReviewIntake(db=ctx.db, github=ctx.github, clock=ctx.clock)
    result = await intake.on_review_comment_changed(event.data)
    log.debug("review comment changed [%s]: %s", event.delivery_id, result.reason)


async def _ask_review_run(ctx: WebhookContext, pickup: ReviewPickup) -> None:
    """A writer's review queues one review run of the task (bot.lifecycle.review_pickup),
    started once the rest of the review's webhooks are in (STEELFRAME_REVIEW_GATHER_SECONDS)."""
    if pickup.accepted and pickup.task_id is not None and ctx.queue is not None:
        await request_review_run(
            ctx.db,
            ctx.github,
            ctx.queue,
            pickup.task_id,
            clock=ctx.clock,
            gather=ctx.settings.review_gather_seconds,
        )


for _action in ("opened", "labeled", "unlabeled", "reopened", "edited"):
    handles(router, "issues", action=_action, needs=ISSUE_NEEDS)(on_pickup_label)
handles(router, "issues", action="closed", needs=ISSUE_NEEDS)(on_issue_closed)
handles(router, "issue_comment", action="created", needs=COMMENT_NEEDS)(on_decision_comment)
handles(router, "pull_request", action="closed", needs=PULL_NEEDS)(on_pull_closed)
handles(router, "pull_request", action="reopened", needs=PULL_NEEDS)(on_pull_reopened)
handles(router, "pull_request_review_comment", action="created", needs=REVIEW_COMMENT_NEEDS)(
    on_review_comment
)
handles(router, "pull_request_review", action="submitted", needs=REVIEW_NEEDS)(on_review_submitted)
handles(router, "pull_request_review", action="dismissed", needs=REVIEW_NEEDS)(on_review_dismissed)
for _action in ("edited", "deleted"):
    handles(router, "pull_request_review_comment", action=_action, needs=REVIEW_COMMENT_NEEDS)(
        on_review_comment_changed
    )
