"""The TUI opening a chat whose turn still runs on the service (sent from the web page, or
before the TUI was restarted, or lost with the connection): the turn shows as it streams,
from the operator's message on, and esc stops it, as in the web GUI (docs/tui.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from tests.conftest import ApiClient, make_settings
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import (
    SIZE,
    notices,
    replies,
    status,
    tui,
    turn_over,
    until,
    user_messages,
)
from tui_client.app import SteelframeApp
from tui_client.chat_turn import STOPPED_TEXT

ASKED = "asked from the web page"


@asynccontextmanager
async def turn_running_elsewhere(
    api_factory: Any, tmp_path: Path
) -> AsyncIterator[tuple[SteelframeApp, Pilot[None], ScriptedRuntime]]:
    """A turn sent by another client, held at the model; then the TUI started, which opens
    the chat the service has active (that turn's)."""
    runtime = ScriptedRuntime([reply("The long answer.")], gate=asyncio.Event())
    api: ApiClient = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    response = await api.post("/api/operator/chat/stream", json={"message": ASKED})
    try:
        await runtime.called.wait()
        app = tui(api)
        async with app.run_test(size=SIZE) as pilot:
            # (Not `ready`: the turn's worker runs until the test releases the model.)
            await until(pilot, lambda: user_messages(app) == [ASKED], "the turn's message")
            yield app, pilot, runtime
    finally:
        response.close()


async def test_a_chat_opened_while_its_turn_runs_streams_that_turn_to_its_end(
    api_factory: Any, tmp_path: Path
) -> None:
    async with turn_running_elsewhere(api_factory, tmp_path) as (app, pilot, runtime):
        assert app.chat.state.busy and status(app).endswith("esc stop"), status(app)
        assert runtime.gate is not None
        runtime.gate.set()
        await until(
            pilot,
            lambda: len(replies(app)) == 1 and turn_over(app, replies(app)[0]),
            "the turn's end",
        )
        assert replies(app)[0].reply.source == "The long answer."
        assert user_messages(app) == [ASKED] and not notices(app)


async def test_esc_stops_the_turn_running_in_a_chat_just_opened(
    api_factory: Any, tmp_path: Path
) -> None:
    async with turn_running_elsewhere(api_factory, tmp_path) as (app, pilot, runtime):
        await pilot.press("escape")
        await until(pilot, lambda: STOPPED_TEXT in notices(app), "the turn stopped")
        await until(pilot, lambda: runtime.cancelled.is_set(), "the model call cancelled")
        assert not app.chat.state.busy
