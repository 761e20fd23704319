"""The sessions drawer on a phone, from the keyboard: while it is open, Tab goes round its
controls (the page under the drawer and its backdrop takes no focus a person cannot see); Esc
closes it and gives the focus back to ☰; a window widened past the drawer's edge leaves the
page usable (docs/gui.md "Window sizes")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.browser.conftest import GuiFactory
from tests.browser.test_gui_layout import LAPTOP, PHONE
from tests.conftest import make_settings

WHERE = "() => document.activeElement.closest('#sidebar') ? 'sidebar' : document.activeElement.id"


async def test_tab_stays_in_the_open_drawer_and_esc_gives_the_focus_back(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path))
    for title in ("one", "two"):
        await api.post("/api/operator/chat/new", json={"title": title})
    gui = await gui_factory(api, viewport=PHONE)
    page = gui.page
    await page.focus("#menu-toggle")
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#sidebar", state="visible")
    assert await page.evaluate(WHERE) == "sidebar"
    stops = await page.locator("#sidebar button:visible:not([tabindex='-1'])").count()
    visited = []
    for _ in range(2 * stops + 2):  # past its last control (out to the browser), and round
        await page.keyboard.press("Tab")
        visited.append(await page.evaluate(WHERE))
    # The drawer's controls, or the browser's own (the document keeps no focus): never one
    # of the page's under the drawer.
    assert set(visited) == {"sidebar", ""}, visited
    assert visited[-1] == "sidebar"

    await page.keyboard.press("Escape")
    await page.wait_for_selector("#sidebar", state="hidden")
    assert await page.evaluate(WHERE) == "menu-toggle"
    await page.keyboard.press("Tab")
    assert await page.evaluate(WHERE) != "sidebar"  # the page is reachable again

    # Opened, then the window widened to a laptop's: the sidebar is a column again, and the
    # page beside it works.
    await page.click("#menu-toggle")
    await page.wait_for_selector("#sidebar", state="visible")
    await page.set_viewport_size(LAPTOP)
    await page.click("#message")
    assert await page.evaluate(WHERE) == "message"
