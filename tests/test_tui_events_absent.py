"""The TUI on a service without the operator events stream (a 404, not a 503): live updates
stop at once, with the header and a notification saying so, the stream is not asked again
(a 404 is not a Redis outage: tests/test_tui_streams_redis_failure.py re-opens those), and
the Board and the session list are reloaded every `stopped_refresh_seconds` from then on
(STOPPED_REFRESH_SECONDS, 10 s, unless the app is given another period: these tests give it
a short one), so a task or a chat made elsewhere shows without ctrl+r (as the web GUI polls
in that case). A Board or a session list slower to answer than the period still shows: a
tick does not cancel the load still running, it skips it; nor does a reload asked for
meanwhile (ctrl+r, F2): the list is loaded once more after it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web
from sqlalchemy.orm import Session
from textual.worker import WorkerState

from bot.lifecycle.tasks import new_task
from tests.conftest import ApiClient, make_settings
from tests.fakes.no_events import WithoutEvents
from tests.fakes.service_middleware import Handler
from tests.fakes.tui import SIZE, HeldAnswers, notices, ready, session_titles, until
from tui_client.api import OperatorClient
from tui_client.app import STOPPED_REFRESH_SECONDS, SteelframeApp

ISSUE = 7
ELSEWHERE = "Opened in another client"
# The timer's period in these tests: what they check happens over a few periods, whatever
# their length (the default's 10 s made the first test take 12 s).
PERIOD = 0.2


def _tui(api: ApiClient) -> SteelframeApp:
    """The TUI on the service, refreshing every PERIOD, its answers unchecked against the
    OpenAPI document (a 404 is not an answer the events stream declares)."""
    client = OperatorClient(str(api.raw.make_url("")).rstrip("/"), api.token)
    return SteelframeApp(client, stopped_refresh_seconds=PERIOD)


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
    api = await api_factory(make_settings(tmp_path), plugins=absent.plugins())
    app = _tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await until(pilot, lambda: "live updates stopped" in app.sub_title, lambda: app.sub_title)
        assert app.sub_title == (
            f"{app.client.base_url} · live updates stopped · refreshing every {PERIOD} s"
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


def test_the_period_is_ten_seconds_unless_the_app_is_given_another() -> None:
    app = SteelframeApp(OperatorClient("http://127.0.0.1:1", "token"))
    assert app.stopped_refresh_seconds == STOPPED_REFRESH_SECONDS == 10


class SlowBoard(WithoutEvents):
    """Without the events stream, and each GET of the Board answered only once `periods`
    more session lists were asked after it (each tick of the timer asks one): a Board
    slower than the timer's period, however short. `most_held` is how many Board requests
    were waiting at once at most."""

    BOARD = "/api/operator/board"
    SESSIONS = "/api/operator/chat/sessions"

    def __init__(self, periods: int) -> None:
        super().__init__()
        self.periods = periods
        self.lists = 0
        self.listed = asyncio.Condition()
        self.held = 0
        self.most_held = 0
        self.boards = 0  # Board requests received

    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "GET" and request.path == self.SESSIONS:
            async with self.listed:
                self.lists += 1
                self.listed.notify_all()
        elif request.method == "GET" and request.path == self.BOARD:
            wanted = self.lists + self.periods
            self.boards += 1
            self.held += 1
            self.most_held = max(self.most_held, self.held)
            try:
                async with self.listed:
                    await self.listed.wait_for(lambda: self.lists >= wanted)
            finally:
                self.held -= 1
        return await super().around(request, handler)


async def test_a_board_slower_than_the_period_still_shows(api_factory: Any, tmp_path: Path) -> None:
    """Each tick would start a new Board load, cancelling the one running (the loads are
    exclusive): a Board answering in more than a period never showed. A tick skips a list
    whose load still runs."""
    slow = SlowBoard(periods=3)
    api = await api_factory(make_settings(tmp_path), plugins=slow.plugins())
    task_id = api.services.db.call(_queued)
    app = _tui(api)
    async with app.run_test(size=SIZE) as pilot:
        # No key pressed (the Board tab's own load would cancel a tick's, as ctrl+r does):
        # the Board is loaded by the timer's ticks only, and the first one shows the task.
        await until(pilot, lambda: app.stopped_refresh is not None, "live updates to stop")
        await until(pilot, lambda: str(task_id) in app.board.tasks, "the slow Board")
        assert app.board.tasks[str(task_id)].issue == ISSUE
        assert slow.lists >= slow.periods  # the timer ticked while the Board was held
        assert slow.most_held == 1  # no tick asked for the Board again meanwhile


async def test_a_reload_asked_for_while_a_timed_one_runs_does_not_cancel_it(
    api_factory: Any, tmp_path: Path
) -> None:
    """ctrl+r and F2 pressed while a tick's Board load waits for its answer: the loads were
    exclusive, so each press cancelled the one running and started another (pressed more
    often than the Board answers, it never showed). The tick's load runs to its end and
    shows the Board; the presses are answered by one more load after it, never beside it."""
    slow = SlowBoard(periods=3)
    api = await api_factory(make_settings(tmp_path), plugins=slow.plugins())
    task_id = api.services.db.call(_queued)
    app = _tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: slow.held == 1, "a tick's Board load to wait for its answer")
        (timed,) = [w for w in app.workers if w.group == "board" and not w.is_finished]
        await pilot.press("ctrl+r")
        await pilot.press("f2")
        await until(pilot, lambda: str(task_id) in app.board.tasks, "the slow Board")
        assert timed.state is not WorkerState.CANCELLED
        await until(pilot, lambda: slow.boards >= 2, lambda: f"{slow.boards} Board requests")
        assert slow.most_held == 1  # the presses' load came after the tick's, not beside it


async def test_a_session_list_slower_than_the_period_is_neither_cancelled_nor_asked_beside(
    api_factory: Any, tmp_path: Path
) -> None:
    """A tick's session list held over three more ticks, then ctrl+r: the ticks skip it,
    and the press no longer cancels it (the list's loads were exclusive: on a service
    slower to answer than the asks came, it never showed); the press is answered by one
    more load after it, which shows the chat made while the first waited."""
    boards = HeldAnswers(SlowBoard.BOARD, inner=WithoutEvents())  # counts ticks: never held
    lists = HeldAnswers(SlowBoard.SESSIONS, inner=boards)
    api = await api_factory(make_settings(tmp_path), plugins=lists.plugins())
    app = _tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.stopped_refresh is not None, "live updates to stop")
        await ready(pilot, app)
        lists.holding = True
        await until(pilot, lambda: lists.held == 1, "a tick's session list to be held")
        (timed,) = [w for w in app.workers if w.group == "sessions" and not w.is_finished]
        await api.post("/api/operator/chat/new", json={"title": ELSEWHERE})
        ticks = boards.asked
        await until(pilot, lambda: boards.asked >= ticks + 3, "three ticks while it is held")
        await pilot.press("ctrl+r")
        lists.release.set()
        await until(pilot, lambda: ELSEWHERE in session_titles(app), "the newer session list")
        assert timed.state is WorkerState.SUCCESS  # (CANCELLED by ctrl+r when exclusive)
        assert lists.most_held == 1  # no tick and no press asked beside the held load


async def test_a_tick_once_the_screen_is_gone_does_nothing(
    api_factory: Any, tmp_path: Path
) -> None:
    """Textual closes the app's screens before it stops the app's timers: a tick in between
    (seen at a short period on a loaded machine) found no Board and failed the app's exit.
    The tick is called as the timer calls it, once the app has closed its screens."""
    api = await api_factory(make_settings(tmp_path), plugins=WithoutEvents().plugins())
    app = _tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.stopped_refresh is not None, "live updates to stop")
    assert not app.query("BoardPanel")  # the screen is gone
    app._reload_lists()


class RefusedSessions(WithoutEvents):
    """Without the events stream, and every GET of the session list refused (503, as the
    service answers while its database is away), counted in `refused`."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "GET" and request.path == SlowBoard.SESSIONS:
            self.refused += 1
            raise web.HTTPServiceUnavailable(reason="the test refuses the session list")
        return await super().around(request, handler)


async def test_a_reload_failing_each_tick_says_so_once_not_every_period(
    api_factory: Any, tmp_path: Path
) -> None:
    """Each tick's session list failed the same way, and each failure was added to the
    transcript: the operator's conversation scrolled away under the same error line, one
    more every 10 s for as long as the app ran (with a wrong token: every list refused,
    the events stream too). An error already the transcript's last line is not added again."""
    refusing = RefusedSessions()
    api = await api_factory(make_settings(tmp_path), plugins=refusing.plugins())
    app = _tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.stopped_refresh is not None, "live updates to stop")
        await until(pilot, lambda: refusing.refused >= 4, "several ticks' session lists")
        await until(pilot, lambda: not app.chat.listing.lists.running, "the last tick's load")
        said = [text for text in notices(app) if "refuses the session list" in text]
        assert len(said) == 1, said
