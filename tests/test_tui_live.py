"""The TUI live from the operator events stream, and the operator's keys for focus,
Decision drafts, the Thinking and hits rows; the Board at 80 columns with a task detail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from bot.clock import utcnow
from bot.lifecycle import egress_blocked
from bot.lifecycle.egress_blocked import BlockedHost
from bot.lifecycle.states import TaskState
from bot.lifecycle.tasks import new_task
from bot.lifecycle.transition import Move, apply
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox, make_settings
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import SIZE, notices, ready, replies, send, session_titles, status, tui, until
from tests.fakes.tui_openings import draft_decision
from tests.fakes.turn_relay import HeldOpen
from tui_client.chat import SessionItem
from tui_client.modals import DecisionEditor, IssuePrompt
from tui_client.task_detail import TaskDetailScreen
from tui_client.transcript import hard_breaks


async def _file_from_new_session(api: ApiClient, title: str) -> tuple[str, int]:
    session = await (await api.post("/api/operator/chat/new", json={})).json()
    await api.post(
        "/api/operator/chat", json={"message": "the widget is red", "session": session["id"]}
    )
    filed = await api.post(
        "/api/operator/chat/file", json={"session": session["id"], "title": title, "body": "Red."}
    )
    assert filed.status == 201, await filed.text()
    return str(session["id"]), int((await filed.json())["filed_issue_number"])


async def test_a_result_delivered_while_no_tui_ran_has_its_dot_until_opened(make: Make) -> None:
    """The dot is the service's (kept per operator and session): a TUI started after the
    delivery shows it, and once the session is opened a restarted TUI shows none."""
    lc = await make(coding_command=command("commit"))
    filing, _ = await _file_from_new_session(lc.api, "Make the widget green")
    await lc.api.post("/api/operator/chat/new", json={})  # the operator moved on
    await lc.api.post("/api/operator/chat", json={"message": "something else"})
    await lc.work()  # delivered while no client watched

    def dotted(app: Any) -> list[str]:
        return [i.session_id for i in app.chat.sessions.query("SessionItem") if i.unseen]

    app = tui(lc.api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await until(pilot, lambda: dotted(app) == [filing], lambda: f"the dot, {dotted(app)}")
        app.chat.open_session(filing)
        await until(pilot, lambda: app.chat.state.session_id == filing, "the session to open")
        await until(pilot, lambda: dotted(app) == [], "the dot to go")
    again = tui(lc.api)
    async with again.run_test(size=SIZE) as pilot:
        await ready(pilot, again)
        await until(pilot, lambda: len(session_titles(again)) == 2, "the sessions")
        assert dotted(again) == []


async def test_what_changed_before_the_events_stream_opened_is_shown_once_it_opens(
    api_factory: Any, tmp_path: Path
) -> None:
    """The start-up loads answer before the stream opens, and a stream opened without a
    position starts "now": a chat made in between is listed all the same."""
    held = HeldOpen("/api/operator/events")
    api = await api_factory(make_settings(tmp_path), plugins=held.plugins())
    app = tui(api)

    def listed() -> list[str]:
        return [item.session_id for item in app.chat.sessions.query(SessionItem)]

    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await until(pilot, held.asked.is_set, "the events stream to be asked for")
        made = await (await api.post("/api/operator/chat/new", json={})).json()
        assert made["id"] not in listed()
        held.release.set()
        await until(pilot, lambda: made["id"] in listed(), lambda: f"the new chat, {listed()}")


async def test_a_delivery_while_the_operator_sits_in_another_session_shows_up_live(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    filing, issue = await _file_from_new_session(lc.api, "Make the widget blue")
    await lc.api.post("/api/operator/chat/new", json={})  # the operator moved on
    await lc.api.post("/api/operator/chat", json={"message": "something else"})
    app = tui(lc.api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        assert app.chat.state.session_id != filing
        await lc.work()
        await until(
            pilot,
            lambda: any(f"#{issue} Make the widget blue delivered" in t for t in app.told),
            lambda: f"the delivery notification, got {app.told}",
        )
        await until(
            pilot,
            lambda: any(
                item.unseen and item.session_id == filing
                for item in app.chat.sessions.query("SessionItem")
            ),
            lambda: f"the unseen mark, got {session_titles(app)}",
        )
        await until(
            pilot,
            lambda: any(t.state == "delivered" for t in app.board.tasks.values()),
            "the Board row to turn delivered",
        )
        app.chat.open_session(filing)
        await until(
            pilot,
            lambda: any("was delivered" in m.reply_text for m in replies(app)),
            "the result in the reopened transcript",
        )
        await until(
            pilot,
            lambda: not any(item.unseen for item in app.chat.sessions.query("SessionItem")),
            "the unseen mark to go once the session is open",
        )


async def test_an_open_transcript_refreshes_when_its_task_reports(make: Make) -> None:
    lc = await make(coding_command=command("question"))
    filing, issue = await _file_from_new_session(lc.api, "Add a cache")
    app = tui(lc.api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        assert app.chat.state.session_id == filing
        before = len(replies(app))
        await lc.work()
        await until(
            pilot,
            lambda: (
                len(replies(app)) > before and "needs information" in replies(app)[-1].reply_text
            ),
            "the question in the open transcript",
        )
        # The result in the transcript in front of the operator says it: no notification
        # tells the same news again (the state change reaches the app before its result).
        assert not any(f"#{issue} Add a cache" in t for t in app.told), app.told
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO


async def test_a_result_for_the_open_chat_is_told_while_the_board_is_in_front(
    make: Make,
) -> None:
    lc = await make(coding_command=command("question"))
    filing, issue = await _file_from_new_session(lc.api, "Add a cache")
    app = tui(lc.api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        assert app.chat.state.session_id == filing
        await pilot.press("f2")  # the Board in front: the transcript is not in view
        await lc.work()
        await until(
            pilot,
            lambda: any(f"#{issue} Add a cache waits for a Decision" in t for t in app.told),
            lambda: f"the notification, got {app.told}",
        )


@pytest.fixture
async def board_api(api_factory: Any, tmp_path: Path, redis_url: str) -> ApiClient:
    return await api_factory(make_settings(tmp_path, redis_url=redis_url))


def _seed(session: Session) -> int:
    task = new_task(
        session,
        repo="octo/widgets",
        issue=42,
        title="A rather long title that will not fit the column at all",
        origin_session=None,
        actor="test",
    )
    apply(session, task.id, Move(TaskState.RUNNING, actor="test"))
    asked = Move(
        TaskState.WAITING_FOR_INFO,
        actor="test",
        detail="the coding runtime asked a question",
        changes={"question": "Redis or SQLite?", "cost_usd": 0.42},
    )
    apply(session, task.id, asked)
    return task.id


async def test_the_board_fits_80_columns_and_enter_shows_why_a_task_waits(
    board_api: ApiClient,
) -> None:
    task_id = board_api.services.db.call(_seed)
    refused = BlockedHost(
        "example.org", 443, utcnow(), 3, "example.org:443 is not on this run's allowlist"
    )
    board_api.services.db.call(egress_blocked.add, task_id, 1, 1, [refused])
    app = tui(board_api)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        await pilot.press("f2")
        await until(pilot, lambda: app.board.table.row_count == 1, "the board")
        table = app.board.table
        assert len(table.columns) == 6
        assert table.virtual_size.width <= 80, table.virtual_size
        row = [str(cell) for cell in table.get_row_at(0)]
        assert row[0] == "#42" and row[2] == "waiting" and row[1].endswith("…")
        assert row[4] == "$0.42"  # what the runtime reported spending
        table.focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), "the task detail")
        lines = app.screen.lines  # type: ignore[attr-defined]
        assert "Waiting for a Decision on #42: Redis or SQLite?" in lines
        assert any("cost $0.42" in line for line in lines)
        assert any("waiting_for_info" in line and "asked a question" in line for line in lines)
        assert any(line.startswith("  attempt 1: example.org:443 × 3 · ") for line in lines)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, TaskDetailScreen), "closed")


async def test_f_sets_and_clears_the_focus_with_the_next_message(api: ApiClient) -> None:
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        app.chat.composer.focus()
        await pilot.press("f")  # in the composer `f` is a letter
        assert app.chat.composer.value == "f" and not isinstance(app.screen, IssuePrompt)
        app.chat.composer.value = ""
        await pilot.press("ctrl+f")
        await until(pilot, lambda: isinstance(app.screen, IssuePrompt), "the focus prompt")
        await pilot.press("1", "2", "enter")
        assert status(app).endswith("focus → #12 with the next message")
        await send(pilot, app, "what is this about?")
        session = app.chat.state.session_id
        stored = await (await api.get(f"/api/operator/chat/session/{session}")).json()
        assert stored["focus"] == 12 and app.chat.state.focus == 12
        app.chat.sessions.focus()
        await pilot.press("f")  # outside the composer `f` opens the prompt
        await until(pilot, lambda: isinstance(app.screen, IssuePrompt), "the focus prompt")
        await pilot.press("enter")  # empty: clear
        assert status(app).endswith("focus → none with the next message")
        await send(pilot, app, "and in general?")
        stored = await (await api.get(f"/api/operator/chat/session/{session}")).json()
        assert stored["focus"] is None and app.chat.state.focus is None


async def test_the_decision_draft_can_be_edited_before_p_publishes_it(
    github_sandbox: GitHubSandbox, github_service: ApiClient
) -> None:
    api = github_service
    assert api.services.github is not None
    number = (
        await api.services.github.create_issue(SANDBOX_REPO, title="Deploys", body="?")
    ).number
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await draft_decision(pilot, app, number, "draft a decision: use blue-green deploys")
        app.chat.composer.focus()
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, DecisionEditor), "the editor")
        app.screen.query_one("TextArea").text = "Use rolling deploys, one zone at a time."  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not isinstance(app.screen, DecisionEditor), "the edit kept")
        assert app.chat.state.decision_body == "Use rolling deploys, one zone at a time."
        await pilot.press("P")
        await until(pilot, lambda: any("Published" in n for n in notices(app)), "the publish")
    comments = await api.services.github.list_comments(SANDBOX_REPO, number)
    assert len(comments) == 1
    assert "Use rolling deploys, one zone at a time." in comments[0].body
    assert "blue-green" not in comments[0].body


async def test_ctrl_t_and_ctrl_g_open_the_last_replys_thinking_and_hits(
    api_factory: Any, tmp_path: Path
) -> None:
    runtime = ScriptedRuntime([reply("Line one\nLine two\n\n```\ncode\nmore\n```", thinking="Hmm")])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        message = await send(pilot, app, "two lines please")
        assert message.thinking.collapsed
        await pilot.press("ctrl+t")
        assert not message.thinking.collapsed
        await pilot.press("ctrl+t")
        assert message.thinking.collapsed
        assert message.reply.source == "Line one  \nLine two\n\n```\ncode\nmore\n```"


def test_hard_breaks_keep_each_line_but_not_inside_code() -> None:
    assert hard_breaks("a\nb") == "a  \nb"
    assert hard_breaks("a\n\nb") == "a\n\nb"
    assert hard_breaks("```\nx\ny\n```") == "```\nx\ny\n```"
    assert hard_breaks("- one\n- two") == "- one  \n- two"
    assert hard_breaks("ends  \nnext") == "ends  \nnext"
