"""Deleting the open chat while its turn runs: the service stops the turn and deletes the
chat; the TUI stops listening to it, clears the transcript, forgets the session, and the
next message starts a new chat. Deleted here (`d`) or by another client (an event). The
turn is held at the model (`ScriptedRuntime`'s gate), so the delete lands mid-turn."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import (
    SIZE,
    notices,
    ready,
    replies,
    send,
    session_titles,
    status,
    stored_user_messages,
    tui,
    until,
)
from tui_client.app import SteelframeApp
from tui_client.chat_widgets import SessionItem
from tui_client.events_wire import SessionFrame
from tui_client.modals import ConfirmScreen


async def _turn_held_in_a_second_chat(
    pilot: Any, app: SteelframeApp, gate: asyncio.Event
) -> tuple[str | None, str | None]:
    """A finished chat ("keep me") and a second one whose turn waits at the model."""
    await ready(pilot, app)
    gate.set()
    await send(pilot, app, "keep me")
    kept = app.chat.state.session_id
    await pilot.press("ctrl+n")
    await until(pilot, lambda: app.chat.state.session_id != kept and not replies(app), "a new chat")
    await ready(pilot, app)
    gate.clear()
    await send(pilot, app, "delete me", wait=False)
    await until(
        pilot,
        lambda: app.chat.state.session_id not in (None, kept) and len(session_titles(app)) == 2,
        "the running turn's chat in the list",
    )
    assert app.chat.state.busy
    return kept, app.chat.state.session_id


def _forgotten(app: SteelframeApp) -> bool:
    state = app.chat.state
    return state.session_id is None and not state.busy and not replies(app)


async def test_deleting_the_open_chat_with_d_while_its_turn_runs(
    api_factory: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("The answer.")], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        kept, doomed = await _turn_held_in_a_second_chat(pilot, app, gate)
        app.chat.sessions.focus()
        listed = [item.session_id for item in app.chat.sessions.query(SessionItem)]
        app.chat.sessions.index = listed.index(doomed)
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await until(pilot, lambda: _forgotten(app), "the chat forgotten, its turn ended")
        await until(pilot, lambda: len(session_titles(app)) == 1, "the list without it")
        await until(pilot, runtime.cancelled.is_set, "the model call stopped")
        assert status(app) == "Chat · New chat"
        gate.set()
        await send(pilot, app, "after")  # a new chat, not the deleted one
        assert app.chat.state.session_id not in (None, kept, doomed)
        assert await stored_user_messages(api, app.chat.state.session_id) == ["after"]
        assert await stored_user_messages(api, kept) == ["keep me"]
        assert (await api.get(f"/api/operator/chat/session/{doomed}")).status == 404


async def test_the_open_chat_deleted_by_another_client_while_its_turn_runs(
    api_factory: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("The answer.")], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        kept, doomed = await _turn_held_in_a_second_chat(pilot, app, gate)
        deleted = await api.delete(f"/api/operator/chat/session/{doomed}")
        assert deleted.status < 300, await deleted.text()
        await until(pilot, lambda: _forgotten(app), "the chat forgotten, its turn ended")
        await until(pilot, lambda: len(session_titles(app)) == 1, "the list without it")
        assert status(app) == "Chat · New chat"
        gate.set()
        await send(pilot, app, "after")
        assert app.chat.state.session_id not in (None, kept, doomed)
        assert await stored_user_messages(api, app.chat.state.session_id) == ["after"]


async def test_the_deletion_event_before_the_turns_stopped_frame(
    api_factory: Any, tmp_path: Path
) -> None:
    """The two streams race: the events stream may say `deleted` before the turn's stream
    says `stopped`. Played in that order here (the event applied while the turn still waits
    at the model, the service deleting it after): the chat is forgotten all the same."""
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("The answer.")], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        kept, doomed = await _turn_held_in_a_second_chat(pilot, app, gate)
        assert doomed is not None
        app.apply_event(SessionFrame(session_id=doomed, change="deleted"))
        await until(pilot, lambda: _forgotten(app), "the chat forgotten, its turn ended")
        deleted = await api.delete(f"/api/operator/chat/session/{doomed}")
        assert deleted.status < 300, await deleted.text()
        await until(pilot, lambda: len(session_titles(app)) == 1, "the list without it")
        assert status(app) == "Chat · New chat" and not notices(app)
        gate.set()
        await send(pilot, app, "after")
        assert app.chat.state.session_id not in (None, kept, doomed)
        assert await stored_user_messages(api, app.chat.state.session_id) == ["after"]
