"""Answers drafted from past Decisions (issue 34): a task that asks a question like one a
published Decision answered before is offered that Decision, cited with its issue and
date, as a draft the operator publishes (nothing is published by itself); a Decision
answered differently later (reversed) is never offered; other repositories' never are.
Real service, GitHub sandbox, RQ worker; the recall itself on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from bot.db import Database
from bot.lifecycle import decision_drafts
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.decisions import answered
from tests.fakes.lifecycle import DECISION, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

TENANT = "Which tenant keeps the old export format?"


async def test_a_similar_question_is_offered_the_earlier_decision_as_a_draft(
    make: Make,
) -> None:
    lc = await make(coding_command=command("question"))
    first = await lc.open_issue("Add a cache")
    await lc.work()  # asks "Should the cache use Redis or SQLite?"
    await lc.comment_as("maintainer", first, f"{DECISION}\nUse SQLite.", "write")
    await lc.work()
    assert lc.task(first).state == TaskState.DELIVERED

    second = await lc.open_issue("Add a cache to the importer")
    await lc.work()  # the same question, on another issue
    task = lc.task(second)
    assert task.state == TaskState.WAITING_FOR_INFO
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    (offer,) = detail["offered"]
    assert offer["issue"] == first and offer["decision"] == "Use SQLite."
    assert detail["draft"].startswith("Use SQLite.")
    assert f"#{first} ({lc.decision_recorded_at(first):%Y-%m-%d})" in detail["draft"]
    # Offered, never published: the task still waits and no Decision was posted for it.
    decisions = [c for c in await lc.comments(second) if DECISION in c["body"]]
    assert decisions == [] and lc.task(second).state == TaskState.WAITING_FOR_INFO


def test_a_reversed_decision_and_other_repositories_are_never_offered(any_db: Database) -> None:
    db = any_db  # SQLite and PostgreSQL
    day = datetime(2026, 11, 1, tzinfo=UTC)

    def history(session: Session) -> None:
        answered(session, "o/r", 1, TENANT, "Acme keeps it.", day)
        answered(session, "o/r", 2, TENANT, "Nobody keeps it any more.", day + timedelta(1))
        answered(session, "o/r", 3, "May I add a dependency on lxml?", "Yes.", day)
        answered(session, "other/r", 4, TENANT, "Globex keeps it.", day + timedelta(2))

    db.call(history)
    asked = "Which tenant should keep the old export format?"
    found = db.call(decision_drafts.offered, "o/r", asked, task_id=0)
    assert [o.past.decision for o in found] == ["Nobody keeps it any more."]
    assert found[0].past.cite() == "#2 (2026-11-02)"
    assert decision_drafts.draft([]) is None
    assert db.call(decision_drafts.offered, "o/r", "Rename the CLI flag?", task_id=0) == []
