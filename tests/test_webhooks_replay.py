"""A signed delivery sent again under a new X-GitHub-Delivery is a replay: answered 202,
stored as `replayed`, and it changes nothing (issue 35). Decisions apply in comment order."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.lifecycle import tasks
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.conftest import ApiClient, webhook_headers
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull, one_second
from tests.test_webhooks_endpoint import (
    PATH,
    counting_router,
    drain,
    example,
    rows,
    webhook_settings,
)
from webhooks.deliveries import DeliveryBody, DeliveryStatus, WebhookDelivery
from webhooks.deps import WEBHOOKS
from webhooks.lifecycle_hooks import parse_comment_event
from webhooks.router import build_router


async def replay(api: ApiClient, body: bytes, event: str) -> tuple[int, str]:
    """Send a signed body again under a fresh delivery id: (status, the answer's status)."""
    headers = webhook_headers(body, event, delivery=f"replay-{uuid.uuid4()}")
    response = await api.raw.post(PATH, data=body, headers=headers)
    return response.status, (await response.json())["status"]


def stored(api: ApiClient, event: str, action: str) -> list[tuple[str, bytes]]:
    """(delivery id, body as signed) of each processed delivery of `event.action`, oldest first."""
    found = api.services.db.call(
        lambda s: s.execute(
            select(WebhookDelivery.delivery_id, DeliveryBody.body)
            .join(DeliveryBody, DeliveryBody.delivery_id == WebhookDelivery.delivery_id)
            .where(
                WebhookDelivery.event == event,
                WebhookDelivery.action == action,
                WebhookDelivery.status == DeliveryStatus.PROCESSED,
            )
            .order_by(WebhookDelivery.received_at)
        ).all()
    )
    return [(row.delivery_id, row.body.encode()) for row in found]


def statuses(api: ApiClient) -> dict[str, str]:
    return {row.delivery_id: row.status for row in rows(api)}


async def test_a_replay_under_a_new_id_is_stored_as_replayed_and_never_processed(
    api_factory: Callable[..., Any], tmp_path: Path, any_db_url: str
) -> None:
    api = await api_factory(webhook_settings(tmp_path, database_url=any_db_url))
    calls: list[str] = []
    api.raw.app[WEBHOOKS].processor.router = build_router(counting_router(calls))
    body = example("issues", "opened.payload.json")
    first = await api.raw.post(PATH, data=body, headers=webhook_headers(body, "issues"))
    assert first.status == 202
    # Replays at once: some share the first's write batch, some come after it.
    answers = await asyncio.gather(*(replay(api, body, "issues") for _ in range(20)))
    assert answers == [(202, "replayed")] * 20
    await drain(api)
    assert len(calls) == 1
    kinds = sorted(statuses(api).values())
    assert kinds == [DeliveryStatus.PROCESSED] + [DeliveryStatus.REPLAYED] * 20
    reasons = {row.reason for row in rows(api) if row.status == DeliveryStatus.REPLAYED}
    assert len(reasons) == 1 and "issues.opened:" in reasons.pop()  # keyed on the issue's ids


async def test_a_ping_sent_again_is_a_ping_of_its_own_not_a_replay(
    api_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """A ping changes nothing, and a service started again pings its webhook anew with the
    same bytes (the dev sandbox does): each is processed, none listed as `replayed`."""
    api = await api_factory(webhook_settings(tmp_path))
    body = example("ping", "payload.json")
    for _ in range(2):
        answer = await api.raw.post(PATH, data=body, headers=webhook_headers(body, "ping"))
        assert answer.status == 202 and (await answer.json())["status"] == "accepted"
    await drain(api)
    assert sorted(statuses(api).values()) == [DeliveryStatus.PROCESSED] * 2


async def test_a_new_change_to_the_same_issue_is_not_a_replay(
    api_factory: Callable[..., Any], tmp_path: Path
) -> None:
    api = await api_factory(webhook_settings(tmp_path))
    calls: list[str] = []
    api.raw.app[WEBHOOKS].processor.router = build_router(counting_router(calls))
    data = json.loads(example("issues", "opened.payload.json"))
    for updated_at in ("2030-01-01T00:00:00Z", "2030-01-01T00:00:01Z"):
        data["issue"]["updated_at"] = updated_at  # reopened and opened again: a new change
        body = json.dumps(data).encode()
        answer = await api.raw.post(PATH, data=body, headers=webhook_headers(body, "issues"))
        assert answer.status == 202 and (await answer.json())["status"] == "accepted"
    await drain(api)
    assert len(calls) == 2


async def test_a_pull_request_closed_then_merged_in_one_second_is_two_changes(
    api_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """Closed without a merge, reopened and merged within one second (a script, a bot): the
    merge's `closed` shares `updated_at` with the first close, and is still no replay."""
    api = await api_factory(webhook_settings(tmp_path))
    data = json.loads(example("pull_request", "closed.payload.json"))
    pull = data["pull_request"]
    for merged_at in (None, pull["updated_at"]):
        pull.update(merged=merged_at is not None, merged_at=merged_at)
        body = json.dumps(data).encode()
        answer = await api.raw.post(PATH, data=body, headers=webhook_headers(body, "pull_request"))
        assert answer.status == 202 and (await answer.json())["status"] == "accepted"
    assert await replay(api, body, "pull_request") == (202, "replayed")
    await drain(api)
    kinds = sorted(statuses(api).values())
    assert kinds.count(DeliveryStatus.REPLAYED) == 1 and len(kinds) == 3


async def test_a_pull_request_closed_reopened_and_closed_in_one_second_ends_its_task_closed(
    make: Make,
) -> None:
    """The two closes are the same bytes (GitHub's times are whole seconds), so no content
    key tells the second from a replay of the first: neither is keyed, and the lifecycle,
    following GitHub's state, makes every replay of either change nothing."""
    lc = await make(coding_command=command("commit"))
    issue, number = await delivered_pull(lc)
    with one_second(lc):
        for state in ("closed", "open", "closed"):
            await as_person(lc, "maintainer", "PATCH", f"/pulls/{number}", {"state": state})
    task = lc.task(issue)
    assert task.state == TaskState.CLOSED and "steelframe:closed" in await lc.labels(issue)
    first, last = stored(lc.api, "pull_request", "closed")  # both processed
    (reopened,) = stored(lc.api, "pull_request", "reopened")
    assert first[1] == last[1]  # the same bytes
    events, comments = len(lc.events(task.id)), len(await lc.comments(issue))
    for _, body in (first, last, reopened, first):  # replayed under new ids, in any order
        assert (await replay(lc.api, body, "pull_request"))[0] == 202
        await lc.settle()
    assert lc.task(issue).state == TaskState.CLOSED
    assert len(lc.events(task.id)) == events and len(await lc.comments(issue)) == comments


async def test_a_terminated_task_stays_terminated_when_its_deliveries_are_replayed(
    make: Make,
) -> None:
    lc = await make()
    issue = await lc.open_issue()
    task = lc.task(issue)
    await lc.terminations.terminate(task.id, actor="operator")
    await lc.settle()
    events_before = len(lc.events(task.id))
    (opened,) = stored(lc.api, "issues", "opened")
    labeled = stored(lc.api, "issues", "labeled")
    assert labeled, "the pickup came by a webhook"
    assert await replay(lc.api, opened[1], "issues") == (202, "replayed")
    # A label's addition has no content key (added, removed and added again in one second
    # it is the same bytes): processed, it finds the task followed that pickup already.
    for _, body in labeled:
        assert await replay(lc.api, body, "issues") == (202, "accepted")
    await lc.settle()
    assert lc.task(issue).state == TaskState.TERMINATED
    assert len(lc.events(task.id)) == events_before
    assert lc.queued_jobs() == []


async def _waiting(lc: Lifecycle, task_id: int) -> None:
    """The run asked a question: the task waits for a Decision."""

    def wait(session: Any) -> None:
        if tasks.get_task(session, task_id).state != TaskState.RUNNING:
            apply(session, task_id, Move(TaskState.RUNNING, actor="worker:test"))
        apply(session, task_id, Move(TaskState.WAITING_FOR_INFO, actor="worker:test"))

    lc.ctx.db.call(wait)


async def test_an_older_decision_never_overrides_a_newer_one(make: Make) -> None:
    lc = await make()
    issue = await lc.open_issue()
    task_id = lc.task(issue).id
    await _waiting(lc, task_id)
    await lc.comment_as("maintainer", issue, f"{DECISION}\nUse blue.", "write")
    assert lc.task(issue).pending_decision == "Use blue."
    await _waiting(lc, task_id)
    await lc.comment_as("maintainer", issue, f"{DECISION}\nUse green.", "write")
    assert lc.task(issue).pending_decision == "Use green."
    await _waiting(lc, task_id)
    older, newer = stored(lc.api, "issue_comment", "created")[-2:]

    # The older Decision's delivery replayed under a new id: stored, no effect.
    assert await replay(lc.api, older[1], "issue_comment") == (202, "replayed")
    await lc.settle()
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO

    # The same comment reaching the service late (GitHub's own delivery, delayed): ignored.
    result = await lc.resumes.on_comment_event(parse_comment_event(json.loads(older[1])))
    assert result is not None and not result.resumed
    assert result.reason == "a newer Decision was already applied"
    # The newer one, once applied, is never applied again.
    again = await lc.resumes.on_comment_event(parse_comment_event(json.loads(newer[1])))
    assert again is not None and not again.resumed
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO and task.pending_decision == "Use green."
