"""Webhook intake after the pull request, as GitHub really delivers: late, repeated, out of
order, for an installation that is gone, or signed but malformed. Nothing is lost, nothing
acted on twice or when stale, and the delivery's record says why."""

from __future__ import annotations

import copy
import json
from typing import Any

from sqlalchemy import select

from bot.lifecycle.models import ReviewThread, Task, ThreadState
from bot.lifecycle.reviews import ack_marker
from github_sandbox.operations import HookEvent
from tests.conftest import GITHUB_DATA, webhook_headers
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull
from tests.test_webhooks_endpoint import PATH
from tests.test_webhooks_installed import deliver, pickup_payload
from webhooks.deliveries import DeliveryStatus, WebhookDelivery


async def test_a_delivery_after_the_app_was_uninstalled_is_ignored_with_the_reason(
    make: Make,
) -> None:
    """GitHub may deliver an event raised before the uninstall after `installation.deleted`
    (deliveries are not ordered): the App can no longer act on the repository, so the
    delivery is ignored, not processed (a task that can never be worked) nor retried until
    dead (its token requests all 404)."""
    lc = await make()
    sandbox = lc.sandbox.sandbox
    installation = sandbox.world.installations[lc.sandbox.installation_id]
    # The App has served the repository (its installation is known to the process).
    row = await deliver(lc, await pickup_payload(lc, lc.repo, installation.id))
    assert row.status == DeliveryStatus.PROCESSED
    sandbox.uninstall(installation)
    await lc.settle()
    (deleted,) = [
        d for d in sandbox.hooks.sent if (d.event, d.action) == ("installation", "deleted")
    ]
    assert deleted.status == 202
    late = await deliver(lc, await pickup_payload(lc, lc.repo, installation.id))
    assert late.status == DeliveryStatus.IGNORED, (late.status, late.reason)
    assert late.reason == f"the App has no installation for {lc.repo}"
    made = lc.api.services.db.call(lambda s: list(s.scalars(select(Task)).all()))
    assert len(made) == 1  # only the pickup from before the uninstall


async def _deliver_event(lc: Lifecycle, event: str, data: dict[str, Any]) -> WebhookDelivery:
    body = json.dumps(data).encode()
    headers = webhook_headers(body, event)
    answer = await lc.api.raw.post(PATH, data=body, headers=headers)
    assert answer.status == 202, await answer.text()
    await lc.settle(retries_within=0)
    delivery_id = headers["X-GitHub-Delivery"]
    row = lc.api.services.db.call(lambda s: s.get(WebhookDelivery, delivery_id))
    assert row is not None
    return row


def _example(lc: Lifecycle, event: str, name: str) -> dict[str, Any]:
    data = json.loads((GITHUB_DATA / "webhook-examples" / event / name).read_text())
    data["repository"]["full_name"] = lc.repo
    data["installation"] = {"id": lc.sandbox.installation_id}
    return dict(data)


async def test_signed_ci_payloads_with_mistyped_optional_fields_are_read_not_retried(
    make: Make,
) -> None:
    """A signed delivery whose optional fields have another type than GitHub's (a list for
    a conclusion, a number for the branches, text for a pull request's head) reads as
    "nothing to act on" and is processed once, not retried until dead on a TypeError."""
    lc = await make()
    check_run = _example(lc, "check_run", "completed.payload.json")
    check_run["check_run"]["conclusion"] = ["failure"]
    failing = _example(lc, "check_run", "completed.payload.json")
    failing["check_run"]["conclusion"] = "failure"
    failing["check_run"]["pull_requests"] = 5
    status = _example(lc, "status", "with-installation.payload.json")
    status["state"] = "failure"
    status["branches"] = 5
    comment = _example(lc, "pull_request_review_comment", "created.payload.json")
    comment["pull_request"]["head"] = "main"
    comment["pull_request"]["user"] = "octocat"
    for event, data in [
        ("check_run", check_run),
        ("check_run", failing),
        ("status", status),
        ("pull_request_review_comment", comment),
    ]:
        row = await _deliver_event(lc, event, data)
        assert (row.status, row.reason) == (DeliveryStatus.PROCESSED, None), event


def _review_threads(lc: Lifecycle, task_id: int) -> list[ReviewThread]:
    return list(
        lc.ctx.db.call(
            lambda s: list(s.scalars(select(ReviewThread).where(ReviewThread.task_id == task_id)))
        )
    )


def _dismissal(submitted: dict[str, Any], review_id: int) -> dict[str, Any]:
    """GitHub's `pull_request_review` dismissed for the review `submitted` names (as
    octokit's schema has it: the same review, state `dismissed`)."""
    dismissed = copy.deepcopy(submitted)
    dismissed["action"] = "dismissed"
    dismissed["review"]["state"] = "dismissed"
    dismissed["review"]["id"] = review_id
    return dismissed


async def test_a_review_dismissed_before_its_run_is_not_acted_on(make: Make) -> None:
    """A maintainer asks for changes, then dismisses the review before the run took it up
    (or GitHub delivers the dismissal first): no run acts on it, no reply answers it, and
    its thread says it was dismissed."""
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    pull = await lc.github.get_pull(lc.repo, number)
    review = await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/reviews",
        {
            "body": "Please use a calmer blue.",
            "event": "REQUEST_CHANGES",
            "commit_id": pull.head.sha,
        },
    )
    assert lc.task(issue).state == "queued"  # the review run waits for the gather time
    hooks = lc.sandbox.sandbox.hooks
    (submitted,) = [
        d for d in hooks.sent if (d.event, d.action) == ("pull_request_review", "submitted")
    ]
    hooks.enqueue([HookEvent("pull_request_review", _dismissal(submitted.payload, review["id"]))])
    await lc.settle()
    # Out of order: a second review's dismissal arrives before its submission.
    later = review["id"] + 1000
    hooks.enqueue([HookEvent("pull_request_review", _dismissal(submitted.payload, later))])
    await lc.settle()
    resubmitted = copy.deepcopy(submitted.payload)
    resubmitted["review"]["id"] = later
    hooks.enqueue([HookEvent("pull_request_review", resubmitted)])
    await lc.settle()
    await lc.work()
    threads = {t.root_id: t for t in _review_threads(lc, task.id)}
    assert set(threads) == {review["id"], later}
    for thread in threads.values():
        assert (thread.state, thread.reason, thread.picked_job) == (
            ThreadState.DECLINED,
            "the review was dismissed on GitHub",
            None,
        )
    bodies = [c["body"] for c in await lc.comments(number)]
    assert not any(ack_marker(later) in body for body in bodies)  # never acknowledged
    assert not any("steelframe-thread-answer" in body for body in bodies)  # never answered
    assert lc.branch_file("REVIEWED.md", str(task.branch)) is None  # no review run coded
    assert lc.task(issue).state == "delivered"


async def test_a_review_comment_edited_or_deleted_before_its_run_is_read_as_it_is_now(
    make: Make,
) -> None:
    """A maintainer corrects their comment, and deletes another, before the review run took
    them up: the run is given the corrected text, and nothing answers the deleted one."""
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    pull = await lc.github.get_pull(lc.repo, number)
    spot = {"commit_id": pull.head.sha, "path": "CHANGE.md", "line": 1}
    kept = await as_person(
        lc, "maintainer", "POST", f"/pulls/{number}/comments", {**spot, "body": "Blue is loud."}
    )
    gone = await as_person(
        lc, "maintainer", "POST", f"/pulls/{number}/comments", {**spot, "body": "And red."}
    )
    assert lc.task(issue).state == "queued"  # the review run waits for the gather time
    hooks = lc.sandbox.sandbox.hooks
    created = {
        d.payload["comment"]["id"]: d.payload
        for d in hooks.sent
        if (d.event, d.action) == ("pull_request_review_comment", "created")
    }
    edited = copy.deepcopy(created[kept["id"]])
    edited["action"] = "edited"
    edited["changes"] = {"body": {"from": "Blue is loud."}}
    edited["comment"]["body"] = "Use teal, not blue."
    deleted = copy.deepcopy(created[gone["id"]])
    deleted["action"] = "deleted"
    hooks.enqueue([HookEvent("pull_request_review_comment", p) for p in (edited, deleted)])
    await lc.settle()
    await lc.work()
    threads = {t.root_id: t for t in _review_threads(lc, task.id)}
    assert threads[gone["id"]].state == ThreadState.DECLINED
    assert threads[gone["id"]].reason == "the comment was deleted on GitHub"
    assert threads[gone["id"]].picked_job is None
    given = threads[kept["id"]].pinned or ""
    assert "Use teal, not blue." in given and "Blue is loud." not in given
    replies = [c for c in await lc.github.list_review_comments(lc.repo, number) if c.in_reply_to_id]
    assert [r.in_reply_to_id for r in replies] == [kept["id"]]  # none to the deleted one


async def test_a_review_comment_deleted_before_its_webhook_is_read_ends_processed(
    make: Make,
) -> None:
    """The comment is gone by the time its `created` webhook is processed (deleted at
    once, or a backlog): nothing to acknowledge, no thread, and the delivery is processed
    with that said, not retried for minutes and then dead on GitHub's 404."""
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    pull = await lc.github.get_pull(lc.repo, number)
    hooks = lc.sandbox.sandbox.hooks
    url = hooks.url
    hooks.url = None  # GitHub's delivery is late: the comment is deleted first
    comment = await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/comments",
        {"commit_id": pull.head.sha, "path": "CHANGE.md", "line": 1, "body": "Oops."},
    )
    repo = lc.sandbox.sandbox.world.repo(lc.repo)
    assert repo is not None
    del repo.review_comments[comment["id"]]
    hooks.url = url
    (late,) = [
        d
        for d in hooks.sent
        if (d.event, d.action) == ("pull_request_review_comment", "created")
        and d.payload["comment"]["id"] == comment["id"]
    ]
    hooks.redeliver(late.id)
    await lc.settle(retries_within=0)
    row = lc.api.services.db.call(lambda s: s.get(WebhookDelivery, late.id))
    assert row is not None
    assert (row.status, row.reason) == (DeliveryStatus.PROCESSED, None)
    assert _review_threads(lc, lc.task(issue).id) == []
    assert lc.task(issue).state == "delivered"
