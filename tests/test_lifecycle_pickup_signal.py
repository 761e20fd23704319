"""An issue closed, reopened and closed again within one second, or its pickup label added,
removed and added again, sends the same bytes twice: neither is taken for a replay, each
step is followed as GitHub says it now, and the task ends as the issue is. Every delivery
sent again, under a new delivery id and in any order, changes nothing; one sent again
under its own id is GitHub's redelivery, a duplicate. A close delivered after the reopen
that undid it is outdated. Real RQ, the GitHub sandbox and the service's webhooks."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from bot.lifecycle.states import TaskState
from tests.conftest import webhook_headers
from tests.fakes.lifecycle import PICKUP, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, one_second, reopen_delivered_before_its_close
from tests.test_webhooks_endpoint import PATH
from tests.test_webhooks_replay import replay, stored
from webhooks.deliveries import DeliveryStatus, WebhookDelivery

FLIPS = ("closed", "reopened", "labeled", "unlabeled")


async def _set_state(lc: Lifecycle, issue: int, state: str) -> None:
    await as_person(lc, "maintainer", "PATCH", f"/issues/{issue}", {"state": state})


async def _seen(lc: Lifecycle, issue: int) -> tuple[Any, ...]:
    """What a person and the Board see of the issue's task."""
    task = lc.task(issue)
    comments = len(await lc.comments(issue))
    return task.state, task.generation, len(lc.events(task.id)), comments, lc.queued_jobs()


async def _replay_every_flip(lc: Lifecycle) -> None:
    """Every close, reopen and label change the service processed, sent again under new
    delivery ids: oldest first, then newest first."""
    sent = [body for action in FLIPS for _, body in stored(lc.api, "issues", action)]
    for body in sent + sent[::-1]:
        assert (await replay(lc.api, body, "issues"))[0] == 202
        await lc.settle()


async def test_an_issue_closed_reopened_and_closed_in_one_second_leaves_its_task_terminated(
    make: Make, any_db_url: str
) -> None:
    lc = await make(database_url=any_db_url)
    issue = await lc.open_issue()
    assert lc.task(issue).state == TaskState.QUEUED
    with one_second(lc):
        for state in ("closed", "open", "closed"):
            await _set_state(lc, issue, state)
    assert len(stored(lc.api, "issues", "closed")) == 2  # the second is no replay
    assert lc.task(issue).state == TaskState.TERMINATED and lc.queued_jobs() == []
    assert "steelframe:terminated" in await lc.labels(issue)
    seen = await _seen(lc, issue)
    await _replay_every_flip(lc)
    assert await _seen(lc, issue) == seen
    # GitHub's own "Redeliver" reuses the delivery id: a duplicate, never processed again.
    delivery, body = stored(lc.api, "issues", "closed")[-1]
    headers = webhook_headers(body, "issues", delivery=delivery)
    again = await lc.api.raw.post(PATH, data=body, headers=headers)
    assert again.status == 200 and (await again.json())["status"] == "duplicate"


async def test_an_issue_reopened_closed_and_reopened_in_one_second_picks_its_task_up(
    make: Make,
) -> None:
    lc = await make()
    issue = await lc.open_issue()
    await _set_state(lc, issue, "closed")
    assert lc.task(issue).state == TaskState.TERMINATED
    with one_second(lc):
        for state in ("open", "closed", "open"):
            await _set_state(lc, issue, state)
    task = lc.task(issue)
    assert task.state == TaskState.QUEUED and len(lc.queued_jobs()) == 1
    seen = await _seen(lc, issue)
    await _replay_every_flip(lc)
    assert await _seen(lc, issue) == seen
    # Terminated by an operator, its issue open and labelled: no pickup sent again starts it.
    await lc.terminations.terminate(task.id, actor="operator")
    await lc.settle()
    seen = await _seen(lc, issue)
    await _replay_every_flip(lc)
    assert await _seen(lc, issue) == seen and seen[0] == TaskState.TERMINATED


async def test_a_pickup_label_added_removed_and_added_in_one_second_starts_the_task_again(
    make: Make,
) -> None:
    """The label's second addition, after an operator's terminate in that second, is the
    first's bytes: it still starts the task again."""
    lc = await make()
    issue = await lc.open_issue()
    task_id = lc.task(issue).id
    label = f"/issues/{issue}/labels"
    with one_second(lc):
        await as_person(lc, "maintainer", "DELETE", f"{label}/{PICKUP}")
        await as_person(lc, "maintainer", "POST", label, {"labels": [PICKUP]})
        assert lc.task(issue).state == TaskState.QUEUED  # still the first pickup's
        await lc.terminations.terminate(task_id, actor="operator")
        await lc.settle()
        await as_person(lc, "maintainer", "DELETE", f"{label}/{PICKUP}")
        await as_person(lc, "maintainer", "POST", label, {"labels": [PICKUP]})
    task = lc.task(issue)
    assert task.state == TaskState.QUEUED and task.generation == 2
    assert len(lc.queued_jobs()) == 1
    seen = await _seen(lc, issue)
    await _replay_every_flip(lc)
    assert await _seen(lc, issue) == seen
    await lc.terminations.terminate(task_id, actor="operator")
    await lc.settle()
    seen = await _seen(lc, issue)
    await _replay_every_flip(lc)  # a removal, then an addition: still nothing new
    assert await _seen(lc, issue) == seen and seen[0] == TaskState.TERMINATED


async def test_an_issue_close_delivered_after_its_reopen_leaves_the_task_queued(
    make: Make,
) -> None:
    lc = await make()
    issue = await lc.open_issue()
    await reopen_delivered_before_its_close(lc, "issues", f"/issues/{issue}")
    assert lc.task(issue).state == TaskState.QUEUED and len(lc.queued_jobs()) == 1
    assert "steelframe:queued" in await lc.labels(issue)


async def test_a_pickup_and_a_close_of_an_issue_github_says_is_gone_are_done_with_at_once(
    make: Make,
) -> None:
    """GitHub answers 404 (or 410) for an issue deleted, or moved out of the App's sight,
    since its webhook was sent: an answer that will not change. The pickup starts nothing
    and the close stops the task, each processed once, not retried until it dies."""
    lc = await make()
    issue = await lc.open_issue()
    task_id = lc.task(issue).id
    opened = stored(lc.api, "issues", "labeled")[-1][1]
    del lc.sandbox.sandbox.world.repo(lc.repo).issues[issue]  # deleted on GitHub
    await lc.terminations.terminate(task_id, actor="operator")
    await lc.settle()
    # The pickup, sent again: no task started, the delivery processed once.
    assert (await replay(lc.api, opened, "issues"))[0] == 202
    await lc.settle()
    assert lc.task(issue).state == TaskState.TERMINATED and lc.queued_jobs() == []
    assert _not_done_at_once(lc) == 0
    # A live task whose issue is closed, then deleted before the close is read: stopped.
    other = await lc.open_issue("Make the widget green")
    closed = _closed_payload(stored(lc.api, "issues", "labeled")[-1][1])
    del lc.sandbox.sandbox.world.repo(lc.repo).issues[other]
    assert (await replay(lc.api, closed, "issues"))[0] == 202
    await lc.settle()
    assert lc.task(other).state == TaskState.TERMINATED
    assert _not_done_at_once(lc) == 0


def _closed_payload(labeled: bytes) -> bytes:
    """The `issues.closed` GitHub sends for the issue of a `labeled` delivery."""
    data = json.loads(labeled)
    data["action"] = "closed"
    data["issue"]["state"] = "closed"
    del data["label"]
    return json.dumps(data).encode()


def _not_done_at_once(lc: Lifecycle) -> int:
    """`issues` deliveries not processed at their first attempt (a failed one is retried
    with backoff, and dies after its last)."""
    rows = lc.api.services.db.call(
        lambda s: s.scalars(select(WebhookDelivery).where(WebhookDelivery.event == "issues")).all()
    )
    return sum(1 for row in rows if row.status != DeliveryStatus.PROCESSED or row.attempts > 1)
