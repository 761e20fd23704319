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
    in_sidebar = f"[data-session='{session['id']}'] .session-open"
    item = page.locator(in_sidebar)
    await item.wait_for()
    await page.wait_for_function(
        "(t) => document.querySelector('#chat-title').textContent === t", arg=title
    )
    # Cut where it is shown (the sidebar is drawn again as the chat opens: each look finds
    # the element as it is then, not one the list has since replaced)...
    for where in (in_sidebar, "#chat-title"):
        await page.wait_for_function(
            "(at) => { const el = document.querySelector(at);"
            " return el !== null && el.scrollWidth > el.clientWidth; }",
            arg=where,
        )
    # ...and whole when pointed at.
    assert await item.get_attribute("title") == title
    assert await page.get_attribute("#chat-title", "title") == title
