"""The TUI Board against a real service: tasks by state, Discuss, Terminate, Archive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from bot.lifecycle.states import TaskState
from bot.lifecycle.tasks import new_task
from bot.lifecycle.transition import Move, apply
from tests.conftest import ApiClient, make_settings
from tests.fakes.tui import (
    SIZE,
    THREAD,
    board_task,
    ready,
    replies,
    session_titles,
    status,
    task_detail,
    tui,
    until,
)
from tui_client.app import SteelframeApp
from tui_client.board import board_order, board_summary
from tui_client.keys_footer import KeysFooter
from tui_client.modals import ConfirmScreen
from tui_client.task_detail import TaskDetailScreen, detail_lines

REPO = "octo/widgets"


@pytest.fixture
async def api(api_factory: Any, tmp_path: Path, redis_url: str) -> ApiClient:
    """The service with Redis, which the task lifecycle (terminate, archive) needs."""
    return await api_factory(make_settings(tmp_path, redis_url=redis_url))


def seed(session: Session) -> dict[int, int]:
    """Four tasks, one per interesting state; returns issue -> task id."""
    ids = {}
    for issue, title in (
        (5, "Fix flaky CI"),
        (8, "Speed up deploys"),
        (9, "Add audit log"),
        (11, "Old work"),
    ):
        task = new_task(
            session, repo=REPO, issue=issue, title=title, origin_session=None, actor="test"
        )
        ids[issue] = task.id
    apply(session, ids[8], Move(TaskState.RUNNING, actor="test"))
    delivered = Move(
        TaskState.DELIVERED, actor="test", changes={"pr_url": f"https://github.com/{REPO}/pull/90"}
    )
    apply(session, ids[9], delivered)
    apply(session, ids[11], Move(TaskState.FAILED, actor="test"))
    return ids


def rows(app: SteelframeApp) -> list[list[str]]:
    table = app.board.table
    return [[str(cell) for cell in table.get_row_at(index)][:4] for index in range(table.row_count)]


async def open_board(pilot: Any, app: SteelframeApp) -> None:
    await ready(pilot, app)
    await pilot.press("f2")
    board_status = app.board.query_one("#board-status")
    await until(pilot, lambda: str(board_status.render()) != "Board", "the board to load")
    assert app.board.table.row_count > 0, str(board_status.render())


async def test_board_lists_tasks_by_state_with_issue_title_state_and_pr(api: ApiClient) -> None:
    api.services.db.call(seed)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await open_board(pilot, app)
        assert rows(app) == [
            ["#8", "Speed up deploys", "running", ""],
            ["#5", "Fix flaky CI", "queued", ""],
            ["#11", "Old work", "failed", ""],
            ["#9", "Add audit log", "delivered", "#90"],
        ]
        assert str(app.board.query_one("#board-status").render()) == (
            "Board · running 1 · queued 1 · failed 1 · delivered 1"
        )


async def test_e_on_a_task_starts_an_empty_discuss_chat_focused_on_its_issue(
    api: ApiClient,
) -> None:
    api.services.db.call(seed)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await open_board(pilot, app)
        app.board.table.move_cursor(row=1)  # #5
        await pilot.press("e")
        await until(pilot, lambda: app.chat.state.focus == 5, "the Discuss session")
        assert app.query_one("TabbedContent").active == "chat"  # type: ignore[attr-defined]
        await until(pilot, lambda: session_titles(app) == ["Discuss #5"], "the session list")
        assert app.chat.composer.value == "" and app.chat.composer.has_focus
        assert replies(app) == []
        assert status(app) == "Chat · Discuss #5 · focused on #5"
        stored = await (
            await api.get(f"/api/operator/chat/session/{app.chat.state.session_id}")
        ).json()
        assert stored["messages"] == []


async def test_terminate_and_archive_ask_first(api: ApiClient) -> None:
    ids = api.services.db.call(seed)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await open_board(pilot, app)
        app.board.table.move_cursor(row=0)  # #8, running
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        assert "#8 Speed up deploys" in app.screen.question  # type: ignore[attr-defined]
        await pilot.press("n")
        await pilot.pause()
        assert rows(app)[0][2] == "running"
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await until(
            pilot, lambda: ["#8", "Speed up deploys", "terminated", ""] in rows(app), "terminated"
        )
        index = next(i for i, row in enumerate(rows(app)) if row[0] == "#9")
        app.board.table.move_cursor(row=index)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await until(
            pilot, lambda: all(row[0] != "#9" for row in rows(app)), "the archived row to go"
        )
        board = await (await api.get("/api/operator/board?archived=true")).json()
        states = {task["issue"]: (task["state"], task["archived"]) for task in board["tasks"]}
        assert states[8] == ("terminated", False)
        assert states[9] == ("delivered", True)
        assert ids[9] == next(t["id"] for t in board["tasks"] if t["issue"] == 9)


async def test_l_shows_the_tasks_private_run_log(api: ApiClient) -> None:
    from bot.clock import utcnow
    from bot.lifecycle.models import TaskLog
    from tui_client.modals import LogScreen

    ids = api.services.db.call(seed)

    def logged(session: Session) -> None:
        session.add(
            TaskLog(
                task_id=ids[8],
                generation=1,
                attempt=1,
                holder="h",
                status="error",
                text="[stderr] fatal: [REDACTED] rejected",
                at=utcnow(),
            )
        )

    api.services.db.call(logged)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await open_board(pilot, app)
        app.board.table.move_cursor(row=0)  # #8, running
        await pilot.press("l")
        await until(pilot, lambda: isinstance(app.screen, LogScreen), "the log")
        text = app.screen.text  # type: ignore[attr-defined]
        assert "attempt 1: error" in text and "[stderr] fatal: [REDACTED] rejected" in text
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, LogScreen), "the log to close")


async def test_the_board_warns_when_coding_runs_are_not_isolated(
    api_factory: Any, tmp_path: Path, redis_url: str
) -> None:
    api = await api_factory(make_settings(tmp_path, redis_url=redis_url, coding_sandbox="off"))
    api.services.db.call(seed)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await open_board(pilot, app)
        line = str(app.board.query_one("#board-status").render())
        assert "WARNING" in line and "without isolation" in line


def test_merged_and_closed_tasks_sort_after_delivered_and_are_counted() -> None:
    tasks = [
        board_task(issue=1, state="closed"),
        board_task(issue=2, state="merged"),
        board_task(issue=3, state="delivered"),
    ]
    assert [t.state for t in board_order(tasks)] == ["delivered", "merged", "closed"]
    assert board_summary(tasks) == "Board · delivered 1 · merged 1 · closed 1"


def test_the_task_detail_lists_review_threads_and_whether_the_task_is_ready() -> None:
    detail = task_detail(
        issue=4,
        state="delivered",
        ready_for_review=False,
        review_threads=[
            {**THREAD, "path": "a.py", "line": 3, "author": "ann", "state": "open"},
            {**THREAD, "path": None, "author": "bo", "state": "addressed", "commit": "abc123"},
        ],
    )
    lines = detail_lines(detail)
    start = lines.index("Review threads (not ready for review):")
    assert lines[start + 1 : start + 3] == ["  open a.py:3 @ann", "  addressed review @bo abc123"]
    assert not any("Review threads" in line for line in detail_lines(task_detail(issue=4)))


async def test_the_highlight_stays_on_its_task_when_one_appears_above_it(api: ApiClient) -> None:
    """A task appearing above the highlighted row (a reload after a `task` event) moves the
    highlight with its task: Enter opens the task the operator was on, not the new one."""
    api.services.db.call(seed)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await open_board(pilot, app)
        index = next(i for i, row in enumerate(rows(app)) if row[0] == "#9")
        app.board.table.move_cursor(row=index)
        await pilot.pause()
        assert getattr(app.board.selected_task(), "issue", None) == 9

        def add_above(session: Session) -> None:
            new_task(session, repo=REPO, issue=20, title="New one", origin_session=None, actor="t")

        api.services.db.call(add_above)
        app.board.load()  # as its `task` event does: the task is not listed yet
        await until(pilot, lambda: any(row[0] == "#20" for row in rows(app)), "the new row")
        await pilot.pause()
        moved = next(i for i, row in enumerate(rows(app)) if row[0] == "#9")
        assert moved == index + 1  # the new task sits above it
        assert app.board.table.cursor_row == moved
        assert getattr(app.board.selected_task(), "issue", None) == 9
        app.board.table.focus()
        await pilot.press("enter")
        await until(pilot, lambda: app.screen.__class__.__name__ == "TaskDetailScreen", "detail")
        assert app.screen.detail.issue == 9  # type: ignore[attr-defined]


LONG_TITLE = "Login page shows a blank screen after a wrong password — ünïcødé"


def _long_titled(session: Session) -> None:
    new_task(session, repo=REPO, issue=3, title=LONG_TITLE, origin_session=None, actor="test")


async def test_a_wider_terminal_shows_more_of_each_title_and_80_columns_still_fit(
    api: ApiClient,
) -> None:
    """The columns were sized for 80 columns whatever the terminal: at 200 a title still
    read "Login page shows …", the rest of the row empty. The Title and the last column
    take what a wider terminal has; narrowed back, the table fits 80 again."""
    api.services.db.call(_long_titled)
    app = tui(api)
    async with app.run_test(size=(200, 40)) as pilot:
        await open_board(pilot, app)
        table = app.board.table
        await until(pilot, lambda: rows(app)[0][1] == LONG_TITLE, lambda: str(rows(app)))
        assert table.virtual_size.width <= 200
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: rows(app)[0][1].endswith("…"), lambda: str(rows(app)))
        assert table.virtual_size.width <= 80, table.virtual_size
        assert rows(app)[0][0] == "#3" and rows(app)[0][2] == "queued"


def footer_keys(app: SteelframeApp) -> list[str]:
    """The descriptions of the keys in the footer on top (the current screen's)."""
    footers = list(app.screen.query(KeysFooter))
    if not footers:  # a modal without a footer of its own: the one beneath shows
        footers = list(app.screen_stack[0].query(KeysFooter))
    return [binding.description for binding, _, _ in footers[0]._keys()]


async def test_a_dialog_lists_its_own_keys_not_the_boards_beneath_it(api: ApiClient) -> None:
    """With the task detail or a confirmation open, the footer still listed the Board's
    keys (e Discuss, t Terminate, a Archive, l Log), which do nothing there, and not the
    dialog's (esc to close, y / n). Each dialog lists its own; the Board lists `enter`."""
    api.services.db.call(seed)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await open_board(pilot, app)
        app.board.table.focus()
        await until(pilot, lambda: "Details" in footer_keys(app), lambda: str(footer_keys(app)))
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await until(pilot, lambda: "Yes" in footer_keys(app), lambda: str(footer_keys(app)))
        assert "Terminate" not in footer_keys(app)
        await pilot.press("n")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), "the task detail")
        await until(pilot, lambda: "Close" in footer_keys(app), lambda: str(footer_keys(app)))
        assert "Discuss" not in footer_keys(app)
