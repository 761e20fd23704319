"""A session list that could not load says so where the chats would be, with the key that
tries again, not an empty list that reads as "no chats" (the Board's line says so too);
as the web GUI's sidebar does (docs/gui.md, "Errors")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import Static

from tests.conftest import make_settings
from tests.fakes.tui import SIZE, RefusedPath, plain_tui, ready, send, session_titles, until
from tui_client.app import SteelframeApp

SESSIONS = "/api/operator/chat/sessions"


def sidebar_note(app: SteelframeApp) -> str | None:
    note = app.chat.query_one("#sessions-error", Static)
    return str(note.render()) if note.display else None


async def test_a_session_list_that_failed_says_so_in_place_until_ctrl_r_loads_it(
    api_factory: Any, tmp_path: Path
) -> None:
    refused = RefusedPath(SESSIONS)
    api = await api_factory(make_settings(tmp_path), plugins=refused.plugins())
    app = plain_tui(api)  # (a 503 is not an answer the list declares)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await until(pilot, lambda: sidebar_note(app) is not None, "the list's failure")
        assert sidebar_note(app) == "Chats could not load (503). ctrl+r tries again."
        assert session_titles(app) == []
        refused.refusing = False
        await send(pilot, app, "made while the list was away")
        await pilot.press("ctrl+r")
        await until(
            pilot,
            lambda: session_titles(app) == ["made while the list was away"],
            "the list",
        )
        assert sidebar_note(app) is None
