"""The TUI on a service without the operator events stream (a 404, not a 503): live updates
stop at once, with the header and a notification saying so, the stream is not asked again
(a 404 is not a Redis outage: tests/test_tui_streams_redis_failure.py re-opens those), and
the Board and the session list are reloaded every STOPPED_REFRESH_SECONDS from then on, so a
task or a chat made elsewhere shows without ctrl+r (as the web GUI polls in that case)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from bot.lifecycle.tasks import new_task
from tests.conftest import make_settings
from tests.fakes.no_events import WithoutEvents
from tests.fakes.tui import SIZE, plain_tui, ready, session_titles, until
from tui_client.app import STOPPED_REFRESH_SECONDS

ISSUE = 7
ELSEWHERE = "Opened in another client"


def _queued(session: Session) -> int:
    return new_task(
        session,
        repo="octo/widgets",
        issue=ISSUE,
        title="Made later",
        origin_session=None,
        actor="test",
    ).id


async def test_without_the_events_stream_the_board_and_sessions_refresh_on_a_timer(
    api_factory: Any, tmp_path: Path
) -> None:
    absent = WithoutEvents()
    # Read unchecked: a 404 is not an answer the events stream declares.
    api = await api_factory(make_settings(tmp_path), plugins=absent.plugins())
    app = plain_tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await until(pilot, lambda: "live updates stopped" in app.sub_title, lambda: app.sub_title)
        assert app.sub_title == (
            f"{app.client.base_url} · live updates stopped"
            f" · refreshing every {STOPPED_REFRESH_SECONDS} s"
        )
        assert any(t.startswith("Live updates stopped:") for t in app.told), app.told
        assert not any(w.is_running for w in app.workers if w.group == "events")
        assert app.stopped_refresh is not None

        await pilot.press("f2")  # the Board, loaded before the task exists
        board_status = app.board.query_one("#board-status")
        await until(pilot, lambda: str(board_status.render()) != "Board", "the board to load")
        board_loads = [w for w in app.workers if w.group == "board"]
        await until(pilot, lambda: not any(w.is_running for w in board_loads), "board loads")
        assert app.board.tasks == {} and ELSEWHERE not in session_titles(app)
        task_id = api.services.db.call(_queued)
        await api.post("/api/operator/chat/new", json={"title": ELSEWHERE})
        # No key pressed: the timer reloads both lists (a deadline of minutes, not of one
        # period: the machine may be loaded).
        await until(pilot, lambda: str(task_id) in app.board.tasks, "the Board on its timer")
        assert app.board.tasks[str(task_id)].issue == ISSUE
        await until(pilot, lambda: ELSEWHERE in session_titles(app), lambda: "the session list")
        assert absent.asked == 1
    assert app.stopped_refresh is None  # stopped on unmount
