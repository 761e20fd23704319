"""A lost connection to the service shows: while the live events stream cannot get back (the
service stopped, the network went), a line under the header says so and that the page is
reconnecting, and it goes once the stream is back (docs/gui.md "Live updates"). A stream
that comes back at its first try says nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.browser.conftest import WAIT_MS, GuiFactory
from tests.conftest import make_settings

# An events stream that opens and ends at once, asking to be re-tried in 100 ms: the browser
# reconnects by itself (with Last-Event-ID), as after a dropped connection.
DROPPED = "retry: 100\n\n"


async def test_a_lost_events_stream_says_so_until_it_is_back(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path))
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    state = {"mode": "drop"}
    answered: list[str] = []

    async def events(route: Any) -> None:
        answered.append(state["mode"])
        if state["mode"] == "drop":
            state["mode"] = "away"  # dropped once, then the service does not answer
            await route.fulfill(
                status=200, headers={"Content-Type": "text/event-stream"}, body=DROPPED
            )
        elif state["mode"] == "away":
            await route.abort("connectionrefused")
        else:
            await route.continue_()

    await page.route("**/api/operator/events*", events)
    await gui.sign_in()
    banner = page.locator("#connection")
    await banner.wait_for(state="visible")
    text = await banner.inner_text()
    assert "connection to the service was lost" in text.lower()
    assert "reconnecting" in text.lower()
    assert await banner.get_attribute("role") == "status"

    state["mode"] = "back"
    await banner.wait_for(state="hidden")
    await page.wait_for_selector("body[data-live=stream]")
    assert answered[:2] == ["drop", "away"] and answered[-1] == "back"


async def test_a_stream_back_at_its_first_try_says_nothing(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path))
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    opened: list[int] = []
    await page.expose_function("sawConnectionLine", lambda: opened.append(1))
    await page.add_init_script(
        """new MutationObserver(() => {
             const el = document.querySelector('#connection');
             if (el && el.textContent) window.sawConnectionLine();
           }).observe(document, {subtree: true, attributes: true, childList: true});"""
    )
    drops = {"left": 1}
    back = asyncio.Event()

    async def events(route: Any) -> None:
        if drops["left"]:
            drops["left"] -= 1
            await route.fulfill(
                status=200, headers={"Content-Type": "text/event-stream"}, body=DROPPED
            )
        else:
            await route.continue_()
            back.set()

    await page.route("**/api/operator/events*", events)
    await gui.sign_in()
    await asyncio.wait_for(back.wait(), WAIT_MS / 1000)  # reconnected at its first try
    await page.wait_for_selector("body[data-live=stream]")
    assert opened == []  # the observer saw every change since the page loaded
