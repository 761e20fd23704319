"""A reply lost with the connection (the network gone, or the service restarting, past the
turn's re-attaches): once the service can be reached again and the live stream is back, the
open chat is read again and shows the reply stored meanwhile, as the web GUI reopens it; and
ctrl+r ("ctrl+r retry" in the status line) reads the open chat again too (docs/tui.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.conftest import make_settings
from tests.fakes.no_events import WithoutEvents
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import (
    SIZE,
    Outage,
    plain_tui,
    ready,
    replies,
    send,
    stored_user_messages,
    tui,
    turn_over,
    until,
    user_messages,
)


async def test_a_reply_lost_with_the_connection_shows_once_the_service_is_back(
    api_factory: Any, tmp_path: Path
) -> None:
    runtime = ScriptedRuntime([reply("The long answer.")], gate=asyncio.Event())
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    outage = Outage(api.raw.port)
    app = tui(api, url=await outage.start())
    try:
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot, app)
            await until(pilot, lambda: app.sub_title == app.client.base_url, "live updates")
            lost = await send(pilot, app, "what broke the deploy?", wait=False)
            await until(pilot, lambda: len(runtime.requests) == 1, "the model call")
            outage.down()
            await until(pilot, lambda: turn_over(app, lost), "the reply given up")
            assert lost.has_class("failed") and "reconnecting" in app.sub_title
            session = app.chat.state.session_id
            assert runtime.gate is not None
            runtime.gate.set()  # the turn ends on the service, and is stored there
            outage.up()
            await until(
                pilot,
                lambda: [r.reply.source for r in replies(app)] == ["The long answer."],
                lambda: f"the stored reply, not {[r.reply.source for r in replies(app)]}",
            )
            assert not replies(app)[0].has_class("failed") and app.chat.state.session_id == session
    finally:
        await outage.close()


async def test_ctrl_r_reads_the_open_chat_again(api_factory: Any, tmp_path: Path) -> None:
    """Without the events stream nothing says the open chat changed: another client's turn
    in it shows with ctrl+r."""
    absent = WithoutEvents()
    api = await api_factory(make_settings(tmp_path), plugins=absent.plugins())
    app = plain_tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "first, from the TUI")
        session = app.chat.state.session_id
        body = {"message": "second, from the web page", "session": session}
        async with await api.post("/api/operator/chat/stream", json=body) as response:
            await response.read()  # to the turn's end
        assert await stored_user_messages(api, session) == [
            "first, from the TUI",
            "second, from the web page",
        ]
        assert user_messages(app) == ["first, from the TUI"]
        await pilot.press("ctrl+r")
        await until(
            pilot,
            lambda: user_messages(app) == ["first, from the TUI", "second, from the web page"],
            "the other client's message",
        )
