"""The pull request loop in the TUI, in the GUI's words: the Board row shows the review
ledger ("1 open · 1 addressed") or "ready for review", merged and closed tasks read so; a
`task` or `ledger` event updates the row from what it carries, a waiting task's question
included; the task detail names the pull request's state and the thread states as the GUI
does; merges and closes notify with the pull request's link."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiohttp import web
from sqlalchemy.orm import Session
from textual.widgets import Static

from bot.clock import utcnow
from bot.lifecycle.models import ReviewThread, ThreadKind, ThreadState
from bot.lifecycle.states import TaskState
from bot.lifecycle.tasks import new_task
from bot.lifecycle.transition import Move, apply
from tests.conftest import ApiClient, make_settings
from tests.fakes.service_middleware import Handler, ServiceMiddleware
from tests.fakes.tui import SIZE, THREAD, board_task, ready, task_detail, tui, until
from tui_client.app import SteelframeApp
from tui_client.board import review_cell
from tui_client.events_wire import LedgerCounts, TaskFrame
from tui_client.live import task_notice
from tui_client.task_detail import detail_lines

REPO = "octo/widgets"
PR = f"https://github.com/{REPO}/pull/"


@pytest.fixture
async def api(api_factory: Any, tmp_path: Path, redis_url: str) -> ApiClient:
    return await api_factory(make_settings(tmp_path, redis_url=redis_url))


def _thread(task_id: int, root: int, state: ThreadState, commit: str | None = None) -> ReviewThread:
    now = utcnow()
    return ReviewThread(
        task_id=task_id,
        kind=ThreadKind.COMMENT,
        root_id=root,
        pr_number=90,
        path="a.py",
        line=3,
        author="ann",
        state=state,
        commit=commit,
        text="Rename this.",
        created_at=now,
        updated_at=now,
    )


def seed(session: Session) -> dict[int, int]:
    """Delivered with a reviewed PR (#9), delivered and unreviewed (#10), merged (#12)."""
    ids = {}
    for issue in (9, 10, 12):
        task = new_task(
            session, repo=REPO, issue=issue, title=f"Task {issue}", origin_session=None, actor="t"
        )
        ids[issue] = task.id
        apply(session, task.id, Move(TaskState.RUNNING, actor="t"))
        apply(
            session,
            task.id,
            Move(TaskState.DELIVERED, actor="t", changes={"pr_url": f"{PR}{90 + issue}"}),
        )
    session.add(_thread(ids[9], 1, ThreadState.OPEN))
    session.add(_thread(ids[9], 2, ThreadState.ADDRESSED, "abc1234"))
    apply(session, ids[12], Move(TaskState.MERGED, actor="t", detail="pull request #102 merged"))
    return ids


def rows(app: SteelframeApp) -> dict[str, list[str]]:
    table = app.board.table
    found = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
    return {row[0]: row for row in found}


async def test_board_rows_show_the_ledger_and_the_end_of_the_loop(api: ApiClient) -> None:
    ids = api.services.db.call(seed)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("f2")
        await until(pilot, lambda: app.board.table.row_count == 3, "the board to load")
        shown = rows(app)
        assert shown["#9"][2] == "delivered" and shown["#9"][5] == "1 open · 1 addressed"
        assert shown["#10"][5] == "ready for review"
        assert shown["#12"][2] == "merged" and shown["#12"][3] == "#102"
        # A thread settles elsewhere: the `ledger` event reloads the row.
        api.services.db.call(lambda s: _settle(s, ids[9]))
        await until(
            pilot,
            # (whole: at 120 columns the last column is wider than at 80)
            lambda: rows(app)["#9"][5] == "2 addressed · ready for review",
            "the ledger event to reach the Board",
        )


class TaskReads(ServiceMiddleware):
    """The real service, noting each read of the Board or of one task the TUI makes."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "GET" and (
            request.path == "/api/operator/board"
            or re.fullmatch(r"/api/operator/tasks/\d+", request.path)
        ):
            self.reads.append(request.path)
        return await handler(request)


def _deliver_and_ask(session: Session, ids: dict[int, int]) -> None:
    """#10 gets a review thread; #9 is taken up again and asks a question."""
    session.add(_thread(ids[10], 3, ThreadState.OPEN))
    apply(session, ids[9], Move(TaskState.QUEUED, actor="t"))
    apply(session, ids[9], Move(TaskState.RUNNING, actor="t"))
    apply(
        session,
        ids[9],
        Move(TaskState.WAITING_FOR_INFO, actor="t", changes={"question": "Blue or teal?"}),
    )


async def test_task_and_ledger_events_update_rows_without_a_request(
    api_factory: Any, tmp_path: Path, redis_url: str
) -> None:
    """The `task` and `ledger` events carry what a row shows (state, pull request loop, a
    waiting task's question): the TUI reads neither the Board nor the task again for them."""
    reads = TaskReads()
    api = await api_factory(make_settings(tmp_path, redis_url=redis_url), plugins=reads.plugins())
    ids = api.services.db.call(seed)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("f2")
        await until(pilot, lambda: app.board.table.row_count == 3, "the board to load")
        await until(pilot, lambda: not app.board.loads.running, "the board's loads to end")
        before = list(reads.reads)
        api.services.db.call(lambda s: _deliver_and_ask(s, ids))
        await until(
            pilot,
            lambda: (
                rows(app)["#9"][2:] == ["waiting", "#99", "", "Blue or teal?"]
                and rows(app)["#10"][5] == "1 open"
            ),
            lambda: f"the rows to follow the events; they show {rows(app)}",
        )
        assert app.board.tasks[str(ids[9])].question == "Blue or teal?"
        assert "waiting_for_info 1" in str(app.query_one("#board-status", Static).render())
        assert reads.reads == before, "the TUI read the Board or a task for an event's news"
        assert "#9 Task 9 waits for a Decision: Blue or teal?" in app.told


def _settle(session: Session, task_id: int) -> None:
    thread = session.query(ReviewThread).filter_by(task_id=task_id, root_id=1).one()
    thread.state = ThreadState.ADDRESSED
    thread.commit = "def5678"


def test_the_cell_and_the_detail_use_the_guis_words() -> None:
    counts = {"open": 0, "addressed": 0, "declined": 0, "needs_operator": 1}
    review = {**counts, "summary": "1 needs operator"}
    task = board_task(pr_state="draft", review=review, ready_for_review=False)
    assert review_cell(task) == "draft · 1 needs operator"
    assert review_cell(board_task(pr_state=None)) is None
    merged = {**review, "summary": "2 addressed"}
    assert review_cell(board_task(pr_state="merged", review=merged)) is None
    detail = task_detail(
        issue=4,
        state="delivered",
        pr_url=f"{PR}5",
        pr_state="draft",
        review=review,
        ready_for_review=False,
        review_threads=[{**THREAD, "author": "bo", "state": "needs_operator"}],
    )
    lines = detail_lines(detail)
    assert f"Pull request (draft): {PR}5" in lines
    start = lines.index("Review threads (1 needs operator · not ready for review):")
    assert lines[start + 1] == "  needs operator review @bo"


def test_merges_and_closes_notify_with_the_pull_requests_link() -> None:
    merged = TaskFrame(
        task_id=1,
        repo="o/r",
        issue=3,
        title="Blue",
        state="merged",
        pr_url=f"{PR}7",
        cost_usd=0.0,
        tokens=0,
        reason="x",
        updated_at="",
        pr_state="merged",
        review=LedgerCounts(open=0, addressed=0, declined=0, needs_operator=0, summary=""),
        ready_for_review=False,
        question=None,
    )
    assert task_notice(merged) == (f"#3 Blue was merged: {PR}7", "information")
    closed = msgspec.structs.replace(merged, state="closed")
    assert task_notice(closed) == (f"#3 Blue was closed without a merge: {PR}7", "warning")
