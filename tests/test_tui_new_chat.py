"""ctrl+n and then Enter before the service has answered the new chat: the message goes to
the new chat (held until it exists), never to the old one; a second one is refused and
kept in the composer; a refused new chat leaves the message in the composer; a running turn
keeps its busy state; ctrl+r meanwhile reloads the list and leaves the switch alone. The
service's answer to `POST /chat/new` is held by the test (`HeldNewChat`), so the race is
played in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from bot.config import Settings
from tests.conftest import ApiClient, make_settings, read_sse
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import (
    SIZE,
    HeldNewChat,
    notices,
    ready,
    replies,
    send,
    session_titles,
    status,
    stored_user_messages,
    tui,
    turn_over,
    until,
    user_messages,
)
from tui_client.app import SteelframeApp
from tui_client.chat_switch import ONE_WAITS


@asynccontextmanager
async def new_chat_opening(
    api_factory: Any, settings: Settings, *, refuse: bool = False
) -> AsyncIterator[tuple[HeldNewChat, ApiClient, SteelframeApp, Pilot[None], str | None]]:
    """The TUI with a chat on "old topic", then ctrl+n pressed and the service's answer to
    the new chat held (`refuse`: a refusal once released); yields the hold, the service,
    the app, its pilot and the old chat's id."""
    held = HeldNewChat()
    held.refuse = refuse
    api = await api_factory(settings, plugins=held.plugins())
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "old topic")
        old_id = app.chat.state.session_id
        await pilot.press("ctrl+n")
        await until(pilot, held.asked.is_set, "the new-chat request")
        yield held, api, app, pilot, old_id


async def test_a_message_sent_while_the_new_chat_opens_goes_to_the_new_chat(
    api_factory: Any, settings: Settings
) -> None:
    async with new_chat_opening(api_factory, settings) as (held, api, app, pilot, old_id):
        await pilot.press(*"hello", "enter")  # typed and sent before the service answered
        assert app.chat.composer.value == ""
        assert "your message is sent to it once it is open" in status(app)
        held.release.set()
        await until(pilot, lambda: app.chat.state.session_id != old_id, "the new chat")
        await until(pilot, lambda: user_messages(app) == ["hello"], "the message in it")
        await until(pilot, lambda: turn_over(app, replies(app)[-1]), "the turn to end")
        new_id = app.chat.state.session_id
        assert await stored_user_messages(api, new_id) == ["hello"]
        assert await stored_user_messages(api, old_id) == ["old topic"]


async def test_a_refused_new_chat_keeps_the_message_in_the_composer(
    api_factory: Any, settings: Settings
) -> None:
    refused = new_chat_opening(api_factory, settings, refuse=True)
    async with refused as (held, api, app, pilot, old_id):
        await pilot.press(*"hello", "enter")
        held.release.set()
        await until(pilot, lambda: app.chat.composer.value == "hello", "the message given back")
        await ready(pilot, app)
        assert "new chats are refused by the test (503 " in notices(app)[-2]
        assert notices(app)[-1].startswith("Not sent: the chat did not open")
        assert app.chat.state.session_id == old_id and not app.chat.state.busy
        assert status(app) == "Chat · old topic"
        assert await stored_user_messages(api, old_id) == ["old topic"]


async def test_the_new_chats_turn_stays_busy_and_ctrl_n_waits_for_it(
    api_factory: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("The answer.")], gate=gate)
    held = HeldNewChat()
    api = await api_factory(
        make_settings(tmp_path), runtimes=lambda agent: runtime, plugins=held.plugins()
    )
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        gate.set()
        await send(pilot, app, "old topic")
        old_id = app.chat.state.session_id
        gate.clear()  # the next turn is held at the model: it is still running when checked
        await pilot.press("ctrl+n")
        await until(pilot, held.asked.is_set, "the new-chat request")
        await pilot.press(*"hello", "enter")
        held.release.set()
        # (not counted by model calls: closing the old session may call the model too)
        await until(
            pilot,
            lambda: app.chat.state.session_id != old_id and user_messages(app) == ["hello"],
            "the held message's turn in the new chat",
        )
        # opening the chat did not end the turn: it still shows, and can be stopped
        assert app.chat.state.busy and status(app).endswith("esc stop")
        # a ctrl+n now is refused (its reply would stream into a transcript not shown)
        asked = len(notices(app))
        await pilot.press("ctrl+n")
        await until(pilot, lambda: len(notices(app)) > asked, "the refusal")
        assert notices(app)[-1] == "A turn is in flight: press esc to stop it first."
        assert app.chat.state.busy and not app.chat.state.switching
        gate.set()
        await until(pilot, lambda: turn_over(app, replies(app)[-1]), "the turn to end")
        assert await stored_user_messages(api, app.chat.state.session_id) == ["hello"]
        assert await stored_user_messages(api, old_id) == ["old topic"]


async def test_a_second_message_while_the_chat_opens_is_refused_and_kept_in_the_composer(
    api_factory: Any, settings: Settings
) -> None:
    """One message waits for the chat being opened; a second Enter is refused with a note
    (no turn runs two at a time, here as during a turn) and its text stays to send next."""
    async with new_chat_opening(api_factory, settings) as (held, api, app, pilot, old_id):
        await pilot.press(*"first", "enter")
        await pilot.press(*"second", "enter")
        await until(pilot, lambda: notices(app)[-1:] == [ONE_WAITS], "the refusal")
        assert app.chat.composer.value == "second" and app.chat.state.held == "first"
        held.release.set()
        await until(pilot, lambda: user_messages(app) == ["first"], "the held message sent")
        await until(pilot, lambda: turn_over(app, replies(app)[-1]), "its turn to end")
        new_id = app.chat.state.session_id
        assert new_id != old_id and app.chat.composer.value == "second"
        await send(pilot, app, app.chat.composer.value)
        assert await stored_user_messages(api, new_id) == ["first", "second"]
        assert await stored_user_messages(api, old_id) == ["old topic"]


async def test_ctrl_r_while_a_new_chat_opens_leaves_the_switch_alone(
    api_factory: Any, settings: Settings
) -> None:
    async with new_chat_opening(api_factory, settings) as (held, api, app, pilot, old_id):
        await pilot.press(*"hello", "enter")
        await pilot.press("ctrl+r")
        await until(
            pilot,
            lambda: not any(w.is_running for w in app.workers if w.group == "sessions"),
            "the reload",
        )
        assert app.chat.state.switching and app.chat.state.held == "hello"
        assert "your message is sent to it once it is open" in status(app)
        held.release.set()
        await until(pilot, lambda: user_messages(app) == ["hello"], "the message in the new chat")
        await until(pilot, lambda: turn_over(app, replies(app)[-1]), "the turn to end")
        new_id = app.chat.state.session_id
        assert new_id != old_id
        assert await stored_user_messages(api, new_id) == ["hello"]
        assert await stored_user_messages(api, old_id) == ["old topic"]


async def test_ctrl_r_while_a_new_chat_opens_does_not_open_the_services_active_chat(
    api_factory: Any, settings: Settings
) -> None:
    """With no chat open here and one active on the service (another client's), ctrl+r
    opens that one; not while a new chat is being opened: the message waits for the new."""
    held = HeldNewChat()
    api = await api_factory(settings, plugins=held.plugins())
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await read_sse(await api.post("/api/operator/chat/stream", json={"message": "web"}))
        await until(pilot, lambda: len(session_titles(app)) == 1, "the other client's chat")
        sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
        web = sessions[0]["id"]
        assert sessions[0]["active"] and app.chat.state.session_id is None
        await pilot.press("ctrl+n")
        await until(pilot, held.asked.is_set, "the new-chat request")
        await pilot.press(*"hello", "enter")
        await pilot.press("ctrl+r")
        await until(
            pilot,
            lambda: not any(w.is_running for w in app.workers if w.group == "sessions"),
            "the reload",
        )
        assert app.chat.state.switching and app.chat.state.held == "hello"
        held.release.set()
        await until(pilot, lambda: user_messages(app) == ["hello"], "the message in the new chat")
        await until(pilot, lambda: turn_over(app, replies(app)[-1]), "the turn to end")
        assert app.chat.state.session_id not in (None, web)
        assert await stored_user_messages(api, app.chat.state.session_id) == ["hello"]
        assert await stored_user_messages(api, web) == ["web"]


async def test_text_typed_between_two_ctrl_n_stays_for_the_new_chat(
    api_factory: Any, settings: Settings
) -> None:
    """The draft meant for the old chat is the composer's text at the first ctrl+n; what is
    typed after it is for the new chat, even when ctrl+n is pressed again meanwhile."""
    held = HeldNewChat()
    api = await api_factory(settings, plugins=held.plugins())
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "old topic")
        old_id = app.chat.state.session_id
        app.chat.composer.value = "draft for the old chat"
        await pilot.press("ctrl+n")
        await until(pilot, held.asked.is_set, "the new-chat request")
        app.chat.composer.value = "for the new chat"
        await pilot.press("ctrl+n")
        held.release.set()
        await until(pilot, lambda: app.chat.state.session_id != old_id, "the new chat")
        await ready(pilot, app)
        assert not app.chat.state.switching
        assert app.chat.composer.value == "for the new chat"


async def test_a_draft_left_with_ctrl_n_comes_back_when_its_chat_is_reopened(
    api: ApiClient,
) -> None:
    """What was typed for the old chat is not sent to the new one, nor lost: it waits for
    the old chat (as the web GUI keeps a draft with the chat it was made in)."""
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "old topic")
        old_id = app.chat.state.session_id
        app.chat.composer.value = "half a thought for the old chat"
        await pilot.press("ctrl+n")
        await until(
            pilot,
            lambda: (
                app.chat.state.session_id not in (None, old_id) and not app.chat.state.switching
            ),
            "the new chat",
        )
        assert app.chat.composer.value == ""
        app.chat.open_session(old_id or "")
        await until(
            pilot,
            lambda: app.chat.state.session_id == old_id and not app.chat.state.switching,
            "the old chat again",
        )
        assert app.chat.composer.value == "half a thought for the old chat"
