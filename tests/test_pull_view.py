"""The pull request loop in the task JSON and on the events stream: the Board card's
pr_state, ledger counts (with the words every surface shows) and ready_for_review; a
`ledger` event each time a thread is recorded or settled; merged and closed announced with
the pull request's link. Real RQ workers, the GitHub sandbox, SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy import select

from bot.events.log import Event
from bot.lifecycle.models import ThreadKind, ThreadState
from bot.lifecycle.thread_answers import ThreadAnswer, answer_threads
from bot.models import Operator
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull, send_again


def _payload(event: Event) -> dict[str, Any]:
    """An event's fields as a client reads them (docs/api.md, "Events"), without the stream's
    `id` and `type`."""
    fields = msgspec.to_builtins(event.frame)
    return {key: value for key, value in fields.items() if key not in ("id", "type")}


async def _events(lc: Lifecycle, type_: str) -> list[dict[str, Any]]:
    operator = lc.ctx.db.call(lambda s: s.scalar(select(Operator.id).limit(1)))
    batch = await lc.api.services.events.log.read(operator, 0, wait=0.1)
    return [_payload(e) for e in batch.events if e.type == type_]


async def _card(lc: Lifecycle, task_id: int) -> dict[str, Any]:
    board = (await (await lc.api.get("/api/operator/board")).json())["tasks"]
    return dict(next(t for t in board if t["id"] == task_id))


async def _comment(lc: Lifecycle, number: int, body: str) -> Any:
    pull = await lc.github.get_pull(lc.repo, number)
    return await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/comments",
        {"body": body, "commit_id": pull.head.sha, "path": "CHANGE.md", "line": 1},
    )


async def test_the_card_and_the_stream_follow_the_ledger_to_the_merge(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    card = await _card(lc, task_id)
    assert (card["pr_state"], card["ready_for_review"]) == ("open", True)
    assert card["review"] == {
        "open": 0,
        "addressed": 0,
        "declined": 0,
        "needs_operator": 0,
        "summary": "",
    }

    first = await _comment(lc, number, "Blue is too loud.")
    await _comment(lc, number, "And this <b>line</b>.")
    card = await _card(lc, task_id)
    assert card["review"]["summary"] == "2 open" and card["ready_for_review"] is False
    ledger = await _events(lc, "ledger")
    assert ledger and ledger[-1]["task_id"] == task_id
    assert ledger[-1]["review"]["summary"] == "2 open" and ledger[-1]["ready_for_review"] is False
    assert ledger[-1]["pr_url"] == card["pr_url"]
    # A redelivered review comment records nothing, so it announces nothing either.
    announced = len(ledger)
    await send_again(lc, "pull_request_review_comment", "created", times=2)
    assert len(await _events(lc, "ledger")) == announced

    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    answer = ThreadAnswer(ThreadKind.COMMENT, first["id"], ThreadState.ADDRESSED, "Calmer.", head)
    assert await answer_threads(lc.ctx.db, lc.github, task_id, [answer]) == 1
    await lc.settle()
    settled = (await _events(lc, "ledger"))[-1]
    assert settled["review"]["summary"] == "1 open · 1 addressed"
    assert (settled["review"]["open"], settled["review"]["addressed"]) == (1, 1)
    detail = await (await lc.api.get(f"/api/operator/tasks/{task_id}")).json()
    assert detail["review"] == settled["review"] and detail["pr_state"] == "open"
    assert [t["excerpt"] for t in detail["review_threads"]] == [
        "Blue is too loud.",
        "And this <b>line</b>.",
    ]

    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    card = await _card(lc, task_id)
    assert (card["state"], card["pr_state"], card["ready_for_review"]) == (
        "merged",
        "merged",
        False,
    )
    merged = [e for e in await _events(lc, "task") if e["task_id"] == task_id][-1]
    assert merged["state"] == "merged" and merged["pr_url"] == card["pr_url"]
    assert f"pull request #{number} merged by maintainer" == merged["reason"]


async def test_a_closed_pull_request_reads_closed_on_the_card(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await delivered_pull(lc)
    await as_person(lc, "maintainer", "PATCH", f"/pulls/{number}", {"state": "closed"})
    card = await _card(lc, lc.task(issue).id)
    assert (card["state"], card["pr_state"]) == ("closed", "closed")
    closed = [e for e in await _events(lc, "task") if e["task_id"] == card["id"]][-1]
    assert closed["state"] == "closed" and "closed without a merge" in closed["reason"]
