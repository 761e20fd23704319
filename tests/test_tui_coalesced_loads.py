"""The TUI's loads that must show the newest state (the session list, the open transcript;
the Board's are in tests/test_tui_events_absent.py) on a slow service: a load asked for while
one waits for its answer does not cancel it (they were exclusive workers, so each ask
cancelled the one in flight, and asked more often than the service answers the list never
showed); it is loaded once more after it, once however many asked meanwhile, and that load
shows what changed after the first was answered: no ask is lost, none runs beside another.

The service is without the events stream, and the app's timer far slower than a test: the
only asks are the test's, so the requests can be counted. The answer of a held request is
made before it is held (`HeldAnswers`): it does not know what the test changes meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.worker import Worker, WorkerState

from tests.conftest import ApiClient, make_settings
from tests.fakes.no_events import WithoutEvents
from tests.fakes.tui import SIZE, HeldAnswers, ready, send, session_titles, until, user_messages
from tui_client.api import OperatorClient
from tui_client.app import SteelframeApp
from tui_client.events_wire import ResultFrame

SESSIONS = "/api/operator/chat/sessions"
NEWER = "Made while the list loaded"
NO_TICK = 3600.0  # the list-reload timer, started once the stream is refused, never ticks


def _tui(api: ApiClient) -> SteelframeApp:
    """Answers unchecked against the OpenAPI document (the stream's 404 is not one)."""
    client = OperatorClient(str(api.raw.make_url("")).rstrip("/"), api.token)
    return SteelframeApp(client, stopped_refresh_seconds=NO_TICK)


def _loading(app: SteelframeApp, group: str) -> list[Worker[Any]]:
    return [w for w in app.workers if w.group == group and not w.is_finished]


async def test_a_session_list_asked_for_while_one_loads_is_loaded_once_more_after_it(
    api_factory: Any, tmp_path: Path
) -> None:
    held = HeldAnswers(SESSIONS, inner=WithoutEvents())
    api = await api_factory(make_settings(tmp_path), plugins=held.plugins())
    app = _tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.stopped_refresh is not None, "live updates to stop")
        await ready(pilot, app)
        asked = held.asked
        held.holding = True
        await pilot.press("ctrl+r")
        await until(pilot, lambda: held.held == 1, "the list's answer to be held")
        (first,) = _loading(app, "sessions")
        newer = await (await api.post("/api/operator/chat/new", json={"title": NEWER})).json()
        await pilot.press("ctrl+r")  # asked twice while the first load waits: loaded once
        await pilot.press("ctrl+r")
        held.release.set()
        await until(pilot, lambda: NEWER in session_titles(app), lambda: str(session_titles(app)))
        await until(pilot, lambda: not _loading(app, "sessions"), "the list's loads to end")
        assert first.state is WorkerState.SUCCESS  # (CANCELLED when the loads were exclusive)
        assert held.most_held == 1  # never asked beside the load in flight
        assert held.asked == asked + 2  # the held load, then one more for the asks meanwhile
        # ctrl+r with no chat open opens the service's active one (now the newer): the load
        # after the held one did, the ask carried over to it.
        await until(pilot, lambda: app.chat.state.session_id == newer["id"], "the newer chat")


async def test_the_open_transcript_asked_for_while_it_refreshes_is_read_once_more_after_it(
    api_factory: Any, tmp_path: Path
) -> None:
    """A task result reaching the open chat re-reads its transcript (the events stream's
    `result` frame, applied as the stream's worker applies it): a second result while the
    first re-read waits for its answer cancelled it; it is read once more after it."""
    held = HeldAnswers("", inner=WithoutEvents())
    api = await api_factory(make_settings(tmp_path), plugins=held.plugins())
    app = _tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.stopped_refresh is not None, "live updates to stop")
        await ready(pilot, app)
        await send(pilot, app, "first")
        session_id = app.chat.state.session_id
        assert session_id is not None
        held.path = f"/api/operator/chat/session/{session_id}"
        held.holding = True

        def result() -> ResultFrame:
            return ResultFrame(
                session_id=session_id, task_id=1, kind="delivered", text="", message_id="m"
            )

        app.apply_event(result())
        await until(pilot, lambda: held.held == 1, "the transcript's answer to be held")
        (first,) = _loading(app, "refresh-transcript")
        # Another client's message in this chat, after the held answer was made.
        answered = await api.post(
            "/api/operator/chat", json={"message": "later", "session": session_id}
        )
        assert answered.status == 200, await answered.text()
        app.apply_event(result())
        app.apply_event(result())
        held.release.set()
        await until(pilot, lambda: "later" in user_messages(app), lambda: str(user_messages(app)))
        await until(pilot, lambda: not _loading(app, "refresh-transcript"), "the re-reads to end")
        assert first.state is WorkerState.SUCCESS  # (CANCELLED when they were exclusive)
        assert held.most_held == 1
        assert held.asked == 2
        assert user_messages(app) == ["first", "later"]


async def test_a_tick_of_the_timer_skips_a_list_whose_load_runs(
    api_factory: Any, tmp_path: Path
) -> None:
    """The timer's tick is not an ask to coalesce: a list slower than the period would then
    be asked for back to back. It skips a list whose load runs (the Board's and the session
    list's alike); the next tick asks again. Ticked here as the timer ticks."""
    sessions = HeldAnswers(SESSIONS, inner=WithoutEvents())
    board = HeldAnswers("/api/operator/board", inner=sessions)
    api = await api_factory(make_settings(tmp_path), plugins=board.plugins())
    app = _tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.stopped_refresh is not None, "live updates to stop")
        await ready(pilot, app)
        asked = sessions.asked, board.asked
        sessions.holding = board.holding = True
        await pilot.press("ctrl+r")
        await until(pilot, lambda: (sessions.held, board.held) == (1, 1), "both loads held")
        app._reload_lists()
        app._reload_lists()
        sessions.release.set()
        board.release.set()
        await until(pilot, lambda: not _loading(app, "sessions"), "the list's load to end")
        await until(pilot, lambda: not _loading(app, "board"), "the Board's load to end")
        assert (sessions.asked, board.asked) == (asked[0] + 1, asked[1] + 1)
        app._reload_lists()  # nothing runs: the tick loads both
        await until(pilot, lambda: sessions.asked == asked[0] + 2, "the tick's list")
        await until(pilot, lambda: board.asked == asked[1] + 2, "the tick's Board")
