"""CI results on a commit: `check_run`, `check_suite`, `workflow_run` and `workflow_job`
`completed`, and `status`. A failure on the head commit of a Steelframe pull request gets a
fix run or a person asked (bot.lifecycle.ci_intake); anything else is one log line.

The webhooks GitHub sends as CI starts (`check_run.created`, `check_suite.requested` and
`rerequested`, `workflow_run.requested` and `in_progress`, `workflow_job.queued`,
`in_progress` and `waiting`) report no result: no handler is routed for them, so each is
stored `ignored` (never retried, never a CI row), and `parse_failure` reads `completed`
only."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from bot.lifecycle.ci_failures import parse_failure
from bot.lifecycle.ci_intake import CiIntake
from webhooks.handlers.common import log
from webhooks.routing import WebhookContext, handles

router = Router()
REPO: dict[str, type] = {"repository.full_name": str}
# What each event must carry to be read at all (a payload without it is answered 400).
NEEDS: dict[str, dict[str, type]] = {
    "check_run": {**REPO, "check_run.id": int, "check_run.head_sha": str},
    "check_suite": {**REPO, "check_suite.id": int, "check_suite.head_sha": str},
    "workflow_run": {**REPO, "workflow_run.id": int, "workflow_run.head_sha": str},
    "workflow_job": {**REPO, "workflow_job.id": int, "workflow_job.head_sha": str},
    "status": {**REPO, "sha": str, "state": str, "context": str},
}


async def on_ci_result(event: Event, ctx: WebhookContext) -> None:
    failure = parse_failure(event.event, event.data)
    if failure is None:
        log.debug("ci: %s [%s]: not a failure", event.event, event.delivery_id)
        return
    if ctx.queue is None:
        log.info("ci: %s [%s] ignored: no Redis for the lifecycle", event.event, event.delivery_id)
        return
    intake = CiIntake(
        db=ctx.db,
        github=ctx.github,
        queue=ctx.queue,
        fix_runs=ctx.settings.ci_fix_runs,
        redactor=ctx.redactor,  # built once per process (steelframe.composition)
        github_api_url=ctx.settings.github_api_url,
        clock=ctx.clock,
    )
    outcome = await intake.on_failure(failure)
    log.info(
        "ci: %s [%s]: %s (%s)", event.event, event.delivery_id, outcome.verdict, outcome.reason
    )


def _route(event: str, action: str | None) -> None:
    """One handler object per event: `handles` keeps the needs on the function."""

    async def handler(event_: Event, ctx: WebhookContext) -> None:
        await on_ci_result(event_, ctx)

    handler.__name__ = handler.__qualname__ = f"on_{event}"
    handles(router, event, action=action, needs=NEEDS[event])(handler)


for _event in ("check_run", "check_suite", "workflow_run", "workflow_job"):
    _route(_event, "completed")
_route("status", None)
