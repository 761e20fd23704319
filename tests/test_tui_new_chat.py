"""ctrl+n and then Enter before the service has answered the new chat: the message goes to
the new chat (held until it exists), never to the old one; a refused new chat leaves the
message in the composer; a running turn keeps its busy state. The service's answer to
`POST /chat/new` is held by the test (`HeldNewChat`), so the race is played in order."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.config import Settings
from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import (
    SIZE,
    HeldNewChat,
    notices,
    ready,
    replies,
    send,
    status,
    stored_user_messages,
    tui,
    turn_over,
    until,
    user_messages,
)


async def test_a_message_sent_while_the_new_chat_opens_goes_to_the_new_chat(
    api_factory: Any, settings: Settings
) -> None:
    held = HeldNewChat()
    api = await api_factory(settings, plugins=held.plugins())
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "old topic")
        old_id = app.chat.state.session_id
        await pilot.press("ctrl+n")
        await until(pilot, held.asked.is_set, "the new-chat request")
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
    held = HeldNewChat()
    held.refuse = True
    api = await api_factory(settings, plugins=held.plugins())
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "old topic")
        old_id = app.chat.state.session_id
        await pilot.press("ctrl+n")
        await until(pilot, held.asked.is_set, "the new-chat request")
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
