"""esc pressed before the service has the turn (a slow service, the send still on its way)
stops the turn once it starts, rather than being lost while the turn runs on and is saved,
as the web GUI's Stop does (docs/gui.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import (
    SIZE,
    HeldSend,
    notices,
    ready,
    status,
    stored_user_messages,
    tui,
    until,
)
from tui_client.chat_turn import STOPPED_TEXT


async def test_esc_before_the_service_has_the_turn_stops_it_once_it_starts(
    api_factory: Any, tmp_path: Path
) -> None:
    runtime = ScriptedRuntime([reply("An answer nobody wanted.")], gate=asyncio.Event())
    held = HeldSend()
    api = await api_factory(
        make_settings(tmp_path), runtimes=lambda agent: runtime, plugins=held.plugins()
    )
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        app.chat.composer.value = "oops, the wrong chat"
        await pilot.press("enter")
        await until(pilot, held.asked.is_set, "the send on its way")
        await pilot.press("escape")
        assert status(app) == "Chat · stopping · esc stop"
        shown: list[str] = []  # every status line from here to the turn's end
        refresh = app.chat.refresh_status

        def noted() -> None:
            refresh()
            shown.append(status(app))

        app.chat.refresh_status = noted  # type: ignore[method-assign]
        held.release.set()
        await until(pilot, lambda: STOPPED_TEXT in notices(app), "the turn stopped")
        await until(pilot, lambda: not app.chat.state.busy, "the turn's end")
        # The turn's frames (its first, `turn started`) did not replace "stopping" meanwhile.
        while_busy = set(shown[: shown.index(status(app))])
        assert while_busy == {"Chat · stopping · esc stop"}, while_busy
        assert held.stops >= 1
        assert await stored_user_messages(api, app.chat.state.session_id) == []
