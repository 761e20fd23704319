"""The Dashboard's "Questions waiting": each row says what the agent asks (the task's
`question`, which the Board's list and the `task` event carry), so the operator can answer
without opening the run; on loading and live, when a task starts waiting while the page is
open."""

from __future__ import annotations

from tests.browser.conftest import GuiFactory
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

ASKED = "Should the cache use Redis or SQLite?"  # tests/fakes/coding/question.py


async def test_a_waiting_row_says_what_the_agent_asks(make: Make, gui_factory: GuiFactory) -> None:
    lc = await make(coding_command=command("question"))
    first = await lc.open_issue("Add a cache", "Make the export faster.")
    await lc.work()
    assert lc.task(first).state == "waiting_for_info"
    gui = await gui_factory(lc.api)
    page = gui.page
    await page.wait_for_selector("body[data-live=stream]")  # no event can be missed now
    await gui.screen("dashboard")
    row = page.locator("#dash-waiting .row", has_text=f"#{first}")
    await row.locator("q.why", has_text=ASKED).wait_for()

    second = await lc.open_issue("Add another cache", "Make the import faster.")
    await lc.work()  # starts waiting while the Dashboard is open
    live = page.locator("#dash-waiting .row", has_text=f"#{second}")
    await live.locator("q.why", has_text=ASKED).wait_for()
    assert "asked a question" not in await page.inner_text("#dash-waiting")
