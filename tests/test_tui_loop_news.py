"""Review pickups and CI fix runs in the TUI, in the GUI's words: a `review` event
notifies "#N: answering 2 review threads", a `fix_run` event "#N: CI failed on abc1234, fix
run 1 of 2" (named by the Board's issue: the event has none), and the task detail lists the
CI history from the task JSON's `ci` (docs/api.md), read through the real API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from bot.clock import utcnow
from bot.lifecycle.ci_models import CiFix, CiFixState, CiVerdict
from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from bot.lifecycle.tasks import get_task, new_task, record
from bot.lifecycle.transition import Move, apply
from tests.conftest import ApiClient, make_settings
from tests.fakes.tui import SIZE, ready, task_detail, tui, until
from tui_client.events_wire import FixRunFrame, ReviewFrame
from tui_client.live import news_notice
from tui_client.task_ci import ci_lines
from tui_client.task_detail import TaskDetailScreen

REPO = "octo/widgets"
FAILED = "abc1234" + "0" * 33
FIXED = "def5678" + "0" * 33


@pytest.fixture
async def api(api_factory: Any, tmp_path: Path, redis_url: str) -> ApiClient:
    return await api_factory(make_settings(tmp_path, redis_url=redis_url))


def _delivered(session: Session) -> int:
    task = new_task(session, repo=REPO, issue=9, title="Blue", origin_session=None, actor="t")
    apply(session, task.id, Move(TaskState.RUNNING, actor="t"))
    url = f"https://github.com/{REPO}/pull/90"
    apply(
        session,
        task.id,
        Move(TaskState.DELIVERED, actor="t", changes={"pr_url": url, "pr_number": 90}),
    )
    return task.id


def _picked(session: Session, task_id: int) -> None:
    threads = ["comment:1", "comment:2"]
    record(
        session,
        get_task(session, task_id),
        EventKind.REVIEW_PICKUP,
        actor="review",
        data={"threads": threads},
    )


def _ci_failed(session: Session, task_id: int) -> None:
    now = utcnow()
    session.add(
        CiFix(
            task_id=task_id,
            generation=1,
            pr_number=90,
            head_sha=FAILED,
            chain_sha=FAILED,
            run_number=1,
            verdict=CiVerdict.FIX,
            state=CiFixState.QUEUED,
            failing=[{"name": "tests", "conclusion": "failure"}],
            reason="",
            evidence="E   AssertionError",
            job_id="j",
            created_at=now,
            updated_at=now,
        )
    )
    data = {"head_sha": FAILED, "pr_number": 90, "checks": ["tests"], "fix_run": 1, "fix_runs": 2}
    record(
        session,
        get_task(session, task_id),
        EventKind.CI_FIX_RUN,
        actor="webhook:ci",
        detail="CI failed (tests): fix run 1 of 2.",
        data=data,
    )


async def test_review_pickups_and_fix_runs_notify_and_the_detail_shows_ci(
    api: ApiClient,
) -> None:
    task_id = api.services.db.call(_delivered)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("f2")
        await until(pilot, lambda: app.board.table.row_count == 1, "the board")
        api.services.db.call(lambda s: _picked(s, task_id))
        await until(
            pilot, lambda: "#9: answering 2 review threads" in app.told, lambda: str(app.told)
        )
        api.services.db.call(lambda s: _ci_failed(s, task_id))
        fix = "#9: CI failed on abc1234, fix run 1 of 2"
        await until(pilot, lambda: fix in app.told, lambda: str(app.told))
        assert sum("answering" in told for told in app.told) == 1  # once per event
        app.board.table.focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), "the task detail")
        lines = app.screen.lines  # type: ignore[attr-defined]
        start = lines.index("CI fix runs:")
        assert (
            lines[start + 1]
            == "  CI failed on abc1234 (tests) · fix run 1 of 2 · fix run under way"
        )
        assert not any("AssertionError" in line for line in lines)  # the evidence stays private


def test_the_ci_history_and_the_news_in_the_guis_words() -> None:
    common = {"pr_number": 7, "verdict": "code", "at": "", "updated_at": ""}
    detail = task_detail(
        ci=[
            {
                **common,
                "head_sha": FAILED,
                "checks": ["tests", "lint"],
                "run": 1,
                "of": 2,
                "outcome": "pushed",
                "result_sha": FIXED,
                "reason": "",
            },
            {
                **common,
                "head_sha": FIXED,
                "checks": ["tests"],
                "run": 0,
                "of": 2,
                "outcome": "stopped",
                "result_sha": None,
                "reason": "the failure is not in the code:\n runner lost",
            },
        ]
    )
    assert ci_lines(detail.ci) == [
        "",
        "CI fix runs:",
        "  CI failed on abc1234 (tests, lint) · fix run 1 of 2 · fixed in def5678",
        "  CI failed on def5678 (tests) · no fix run · no fix run: a person is asked",
        "    the failure is not in the code: runner lost",
    ]
    assert ci_lines([]) == []
    one = ReviewFrame(
        task_id=3, repo="o/r", issue=12, pr_number=7, pr_url=None, threads=["review:5"], at=""
    )
    assert news_notice(one) == "#12: answering 1 review thread"
    fix = FixRunFrame(task_id=3, pr_number=7, head_sha=FAILED, checks=["tests"], run=2, of=2)
    assert news_notice(fix, 12) == "#12: CI failed on abc1234, fix run 2 of 2"
    assert news_notice(fix) == "Task 3: CI failed on abc1234, fix run 2 of 2"
