"""Issue 34 in the TUI (Pilot): the task detail shows a plan-first task's plan, the past
Decision offered for its question, the estimate, and tokens without a cost as "cost
unknown"; a queued task held by its repository's budget says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from bot.clock import utcnow
from bot.lifecycle import plan_store, tasks
from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.conftest import ApiClient, make_settings
from tests.fakes.tui import ready, task_detail, tui, until
from tui_client.task_detail import TaskDetailScreen, detail_lines

QUESTION = "Which tenant keeps the old export format?"


@pytest.fixture
async def board_api(api_factory: Any, tmp_path: Path, redis_url: str) -> ApiClient:
    return await api_factory(make_settings(tmp_path, redis_url=redis_url))


def _task(session: Session, issue: int, question: str, **changes: Any) -> int:
    task = tasks.new_task(
        session,
        repo="octo/widgets",
        issue=issue,
        title=f"Task {issue}",
        origin_session=None,
        actor="test",
    )
    apply(session, task.id, Move(TaskState.RUNNING, actor="test"))
    apply(
        session,
        task.id,
        Move(
            TaskState.WAITING_FOR_INFO,
            actor="test",
            data={"question": question},
            changes={"question": question, **changes},
        ),
    )
    return task.id


def _seed(session: Session) -> int:
    answered = _task(session, 7, QUESTION, tokens_used=900, cost_usd=0.2)
    tasks.record(
        session,
        tasks.get_task(session, answered),
        EventKind.DECISION,
        actor="maintainer",
        detail="Acme keeps it.",
    )
    apply(session, answered, Move(TaskState.RUNNING, actor="test"))
    apply(session, answered, Move(TaskState.DELIVERED, actor="test"))
    waiting = _task(session, 42, QUESTION, tokens_used=400)  # no cost reported
    plan = "Files to change: export.py\nApproach: keep Acme's format"
    plan_store.propose(session, waiting, 1, plan, utcnow)
    return waiting


async def test_the_task_detail_shows_the_plan_the_offered_decision_and_the_estimate(
    board_api: ApiClient,
) -> None:
    board_api.services.db.call(_seed)
    app = tui(board_api)
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot, app)
        await pilot.press("f2")
        await until(pilot, lambda: app.board.table.row_count == 2, "the board")
        table = app.board.table
        row = next(i for i in range(table.row_count) if str(table.get_row_at(i)[0]) == "#42")
        table.focus()
        table.move_cursor(row=row)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), "the task detail")
        lines = app.screen.lines  # type: ignore[attr-defined]
        assert any("tokens 400 · cost unknown" in line for line in lines)
        assert "Plan: proposed" in lines and "  Approach: keep Acme's format" in lines
        assert any(line.startswith("  #7 (") and "Acme keeps it." in line for line in lines)
        assert any(line.startswith("Estimate: ~900 tokens") for line in lines)


def test_a_held_task_says_why() -> None:
    held = "held: octo/widgets is over its daily budget (spent 150 tokens of 100)"
    lines = detail_lines(task_detail(issue=4, state="queued", held=held))
    assert held in lines
