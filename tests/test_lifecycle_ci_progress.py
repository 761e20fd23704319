"""CI webhooks on the way to a result (`check_run.created`, `check_suite.requested`,
`workflow_run.requested`/`in_progress`, `workflow_job.queued`/`in_progress`), as GitHub and
the sandbox send them before the `completed` ones: through the real intake they start
nothing, finish nothing, are not retried and leave no CI row; the `completed` ones that
follow still start the fix run."""

from __future__ import annotations

import copy
import json
from typing import Any

from sqlalchemy import select

from bot.lifecycle.ci_failures import parse_failure
from bot.lifecycle.ci_models import CiFix
from bot.lifecycle.models import Task
from bot.lifecycle.states import TaskState
from github_sandbox.ci_ops import ACTIONS_APP, Checks, FailingJob
from github_sandbox.state import Annotation
from tests.conftest import GITHUB_DATA
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import delivered_pull
from webhooks.deliveries import DeliveryStatus, WebhookDelivery

EXAMPLES = GITHUB_DATA / "webhook-examples"


def _set_state(lc: Lifecycle, task_id: int, state: TaskState) -> None:
    """The task's state as a run would leave it, without the run."""
    lc.ctx.db.call(lambda s: s.query(Task).filter(Task.id == task_id).update({"state": state}))


def _stored(lc: Lifecycle, delivery_ids: list[str]) -> list[tuple[str, str | None, str]]:
    rows = lc.ctx.db.call(
        lambda s: list(
            s.scalars(select(WebhookDelivery).where(WebhookDelivery.delivery_id.in_(delivery_ids)))
        )
    )
    by_id = {row.delivery_id: (row.event, row.action, row.status) for row in rows}
    return [by_id[d] for d in delivery_ids]


def _ci_rows(lc: Lifecycle, task_id: int) -> list[CiFix]:
    return list(lc.ctx.db.call(lambda s: s.query(CiFix).filter(CiFix.task_id == task_id).all()))


async def test_a_running_actions_run_starts_nothing_and_its_failure_then_starts_one_fix(
    make: Make,
) -> None:
    lc = await make(coding_command=command("echo"))
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    sandbox = lc.sandbox.sandbox
    repo = sandbox.world.repo(lc.repo)
    assert repo is not None
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    # A run of the task is live: a failure reported now would be retried after it (CiBusy).
    _set_state(lc, task_id, TaskState.RUNNING)
    checks = Checks(sandbox.ops)
    run, hooks = checks.start_workflow(repo, ACTIONS_APP.bot, head, "CI", ["tests"])
    started = sandbox.emit(hooks)
    await lc.settle(retries_within=0.0)
    assert _stored(lc, [d.id for d in started]) == [
        ("workflow_run", "requested", DeliveryStatus.IGNORED),
        ("workflow_job", "queued", DeliveryStatus.IGNORED),
        ("check_run", "created", DeliveryStatus.IGNORED),
        ("workflow_job", "in_progress", DeliveryStatus.IGNORED),
        ("workflow_run", "in_progress", DeliveryStatus.IGNORED),
    ]
    assert _ci_rows(lc, task_id) == [] and lc.queued_jobs() == []
    assert lc.task(issue).state == TaskState.RUNNING
    _set_state(lc, task_id, TaskState.DELIVERED)  # the run ended, pushing nothing
    note = Annotation("tests/test_widget.py", 7, 7, "failure", "red != blue")
    failing = FailingJob("tests", "E   AssertionError\n", [note], "1 failed")
    finished = sandbox.emit(checks.finish_workflow(repo, run, [failing]))
    await lc.settle()
    assert {status for _, _, status in _stored(lc, [d.id for d in finished])} == {
        DeliveryStatus.PROCESSED
    }
    (row,) = _ci_rows(lc, task_id)
    assert row.head_sha == head and row.run_number == 1
    assert lc.task(issue).state == TaskState.RUNNING and len(lc.queued_jobs()) == 1


def _example(relative: str) -> dict[str, Any]:
    return dict(json.loads((EXAMPLES / relative).read_text()))


def test_only_a_completed_event_is_read_as_a_ci_result() -> None:
    """A check run created already concluded carries its conclusion in `created` too, and a
    payload's `action` decides what it reports, not its fields: only `completed` is read."""
    created = copy.deepcopy(_example("check_run/created.payload.json"))
    created["check_run"].update(status="completed", conclusion="failure")
    assert parse_failure("check_run", created) is None
    assert parse_failure("check_run", {**created, "action": "completed"}) is not None
    job = _example("workflow_job/completed.failure.with-organization.payload.json")
    assert parse_failure("workflow_job", job) is not None
    for action in ("queued", "in_progress", "waiting"):
        assert parse_failure("workflow_job", {**job, "action": action}) is None
    suite = copy.deepcopy(_example("check_suite/requested.payload.json"))
    suite["check_suite"]["conclusion"] = "failure"
    assert parse_failure("check_suite", suite) is None
