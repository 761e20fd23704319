"""A first visit, a sign-in and a walk through the screens leave the browser console clean:
no failed request logged as an error (the sign-in check answered 401 on every first visit,
an error in the console of a page that had done nothing wrong), no uncaught error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.runtimes.offline import OfflineRuntime
from tests.browser.conftest import GuiFactory
from tests.conftest import make_settings


async def test_a_first_visit_and_a_walk_through_the_screens_log_no_error(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)  # a fresh browser: no cookie yet
    await gui.send("what is on the Board?")
    await gui.wait_done()
    for screen in ("board", "dashboard", "chat"):
        await gui.screen(screen)
    assert gui.failed_requests == []
    await gui.page.reload()  # signed in: the check finds the session
    await gui.page.wait_for_selector("#app:not([hidden])")
    await gui.page.wait_for_selector("body[data-live=stream]")
    assert gui.console_errors == []
