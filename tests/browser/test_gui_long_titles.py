"""A chat title longer than its place is cut with an ellipsis in the sidebar and the header,
and the whole title shows when pointed at (a `title`), so a long subject can be read
somewhere (docs/gui.md "Sidebar")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.browser.conftest import GuiFactory
from tests.conftest import make_settings

TITLE = "Why the nightly export to the finance warehouse drops rows for accounts in UTC+13 " * 2


async def test_a_long_chat_title_reads_whole_when_pointed_at(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path))
    title = TITLE.strip()[:200]
    session = await (await api.post("/api/operator/chat/new", json={"title": title})).json()
    gui = await gui_factory(api)
    page = gui.page
    item = page.locator(f"[data-session='{session['id']}'] .session-open")
    await item.wait_for()
    await page.wait_for_function(
        "(t) => document.querySelector('#chat-title').textContent === t", arg=title
    )
    # Cut where it is shown...
    for where in (item, page.locator("#chat-title")):
        assert await where.evaluate("el => el.scrollWidth > el.clientWidth")
    # ...and whole when pointed at.
    assert await item.get_attribute("title") == title
    assert await page.get_attribute("#chat-title", "title") == title
