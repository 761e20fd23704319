"""Plan-first is decided once per generation (issue 34; docs/lifecycle.md, "Plan-first
runs"): a task that started coding stays a coding task when its estimate later crosses the
approval threshold, and a new generation decides again. An empty Decision on a waiting plan
changes nothing and says why; a plan still waiting when its task ends reads as withdrawn;
a Decision that settled a plan is never offered for later questions. Real service, GitHub
sandbox, RQ worker; the recall on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
from sqlalchemy.orm import Session

from bot.db import Database
from bot.lifecycle import decision_drafts, leases, plan_store, tasks
from bot.lifecycle.leases import Holder
from bot.lifecycle.models import EventKind
from bot.lifecycle.plan_flow import PLAN_LABEL
from bot.lifecycle.plan_store import PlanStatus
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.fakes.coding import command
from tests.fakes.decisions import answered
from tests.fakes.lifecycle import DECISION, PICKUP, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person
from tui_client.task_leverage import leverage_lines
from tui_client.tasks_wire import TaskDetail

DAY = datetime(2026, 11, 1, tzinfo=UTC)
TITLE = "Rework the export"
PLAN = (
    "**Proposed plan** (plan-first: no code is written until a Decision approves it)\n\n"
    "Files to change: export.py\nApproach: keep both export formats\nRisks: none"
)


def _costly_history(lc: Lifecycle, count: int = 3) -> None:
    """Finished tasks of the repository that cost 1 USD each: the estimate grows to 1 USD."""

    def finished(session: Session) -> None:
        for issue in range(900, 900 + count):
            task = tasks.new_task(
                session,
                repo=lc.repo,
                issue=issue,
                title="Rework the export",
                origin_session=None,
                actor="test",
                clock=lambda: DAY,
            )
            apply(session, task.id, Move(TaskState.RUNNING, actor="test"), lambda: DAY)
            apply(session, task.id, Move(TaskState.FAILED, actor="test"), lambda: DAY)
            stored = tasks.get_task(session, task.id)
            stored.tokens_used, stored.cost_usd = 50_000, 1.0

    lc.ctx.db.call(finished)


def _plan(lc: Lifecycle, issue: int) -> plan_store.Plan | None:
    task = lc.task(issue)
    return lc.ctx.db.call(plan_store.current, task.id, task.generation)


async def test_a_task_that_started_coding_stays_coding_when_its_estimate_crosses_the_threshold(
    make: Make,
) -> None:
    lc = await make(coding_command=command("plan_or_ask"), approve_above_usd=0.5)
    issue = await lc.open_issue("Rework the export")
    await lc.work()  # no past task: no estimate, so the task starts coding, and asks
    task = lc.task(issue)
    assert task.question == "Coding run, told nothing: which format?"
    # While it waits, the repository's past grows: its estimate is now 1 USD, over 0.5.
    _costly_history(lc)
    await lc.comment_as("maintainer", issue, f"{DECISION}\nKeep the old format.", "write")
    await lc.work()
    task = lc.task(issue)
    # The continuation is the coding run it started as, told the Decision: no plan run.
    assert task.state == TaskState.WAITING_FOR_INFO
    assert task.question == "Coding run, told Keep the old format.: which format?"
    assert _plan(lc, issue) is None
    # Picked up again after it ended, the task is a new generation: it decides again.
    await lc.terminations.terminate(task.id, actor="operator")
    await lc.pickups.pickup(lc.repo, issue, title="Rework the export", body="", cause="test")
    await lc.work()
    task = lc.task(issue)
    assert task.generation == 2 and task.state == TaskState.WAITING_FOR_INFO
    assert "Proposed plan" in (task.question or "") and "~1.00 USD" in (task.question or "")
    plan = _plan(lc, issue)
    assert plan is not None and plan.status == PlanStatus.PROPOSED


async def test_an_empty_decision_leaves_the_plan_waiting_and_a_closed_issue_withdraws_it(
    make: Make,
) -> None:
    lc = await make(coding_command=command("plan_or_ask"))
    made = await lc.github.create_issue(
        lc.repo, title="Rework the export", body="Keep both.", labels=[PICKUP, PLAN_LABEL]
    )
    await lc.settle()
    issue = made.number
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO and "Proposed plan" in (task.question or "")
    # Only the marker: no approval, no rejection, no edited plan. Nothing runs; the task's
    # log says why, and the plan still waits for a Decision with words.
    await lc.comment_as("maintainer", issue, DECISION, "write")
    assert lc.queued_jobs() == []
    await lc.work()
    after = lc.task(issue)
    assert after.state == TaskState.WAITING_FOR_INFO and after.question == task.question
    assert after.decision_comment_id is None and after.attempts == task.attempts
    ignored = [e for e in lc.events(task.id) if e.kind == EventKind.DECISION_IGNORED]
    assert len(ignored) == 1 and ignored[0].detail.startswith("the Decision is empty")
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    assert detail["plan"]["status"] == "proposed"
    assert detail["events"][-1]["detail"] == ignored[0].detail
    # The issue closed: the task ends, and its plan can no longer be approved.
    await as_person(lc, "maintainer", "PATCH", f"/issues/{issue}", {"state": "closed"})
    await lc.settle()
    assert lc.task(issue).state == TaskState.TERMINATED
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    assert detail["plan"]["status"] == "withdrawn"
    # The TUI's task detail (the web GUI's Board shows the plan only while "proposed").
    shown = leverage_lines(msgspec.convert(detail, TaskDetail))
    assert "Plan: withdrawn" in shown and not any("Approve, edit" in line for line in shown)


def test_a_decision_that_settled_a_plan_is_never_offered_for_later_questions(
    any_db: Database,
) -> None:
    db = any_db  # SQLite and PostgreSQL

    def proposed(session: Session) -> int:
        planned = answered(session, "o/r", 1, PLAN, "Go ahead.", DAY, title=TITLE, comment_id=101)
        plan_store.propose(session, planned, 1, PLAN, lambda: DAY)
        return planned

    planned = db.call(proposed)
    run = Holder.this_process()  # the run that settles it holds the task
    assert leases.acquire(db, planned, run, ttl=60, clock=lambda: DAY)

    def history(session: Session) -> None:
        plan_store.settle(
            session,
            planned,
            1,
            status=PlanStatus.APPROVED,
            brief=PLAN,
            comment_id=101,
            fence=run.id,
            clock=lambda: DAY,
        )
        answered(
            session,
            "o/r",
            2,
            "Which tenant keeps the old format?",
            "Acme.",
            DAY,
            title=TITLE,
            comment_id=102,
        )

    db.call(history)
    # A later plan reads like the old one; a later question like the one Acme answered.
    assert db.call(decision_drafts.offered, "o/r", PLAN, task_id=0) == []
    found = db.call(decision_drafts.offered, "o/r", "Which tenant keeps the format?", task_id=0)
    assert [o.past.decision for o in found] == ["Acme."]
