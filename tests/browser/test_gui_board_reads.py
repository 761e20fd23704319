"""What the Board card and the Dashboard show of a task comes with the Board's list and the
`task` event: a card delivered live reads "PR open · ready for review" and a task that
starts waiting shows its question on the Dashboard, with no request for the task itself
(GET /api/operator/tasks/{id}) per change or per task, as Playwright's request log shows."""

from __future__ import annotations

import re
from typing import Any

from tests.browser.conftest import Gui, GuiFactory
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import delivered_pull

ASKED = "Should the cache use Redis or SQLite?"  # tests/fakes/coding/question.py
TASK_READ = re.compile(r"/api/operator/tasks/\d+(\?.*)?$")


def task_reads(gui: Gui) -> list[str]:
    """Every GET of one task's JSON the page makes from now on (the list it appends to)."""
    reads: list[str] = []

    def seen(request: Any) -> None:
        if request.method == "GET" and TASK_READ.search(request.url):
            reads.append(request.url)

    gui.page.on("request", seen)
    return reads


async def test_a_card_delivered_live_shows_its_pull_request_without_reading_the_task(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("review"))
    gui = await gui_factory(lc.api)
    await gui.page.wait_for_selector("body[data-live=stream]")  # no event can be missed now
    await gui.screen("board")
    reads = task_reads(gui)
    issue, _ = await delivered_pull(lc, "Make the widget blue")
    card = gui.page.locator(f".column[data-state='delivered'] .card[data-issue='{issue}']")
    await card.locator(".card-pull", has_text="ready for review").wait_for()
    assert "PR open" in await card.locator(".card-pull").inner_text()
    assert await card.locator(".pr-state").get_attribute("href") == lc.task(issue).pr_url
    await gui.screen("dashboard")
    row = gui.page.locator("#dash-delivered .row", has_text=f"#{issue}")
    await row.locator(".ready", has_text="ready for review").wait_for()
    assert reads == [], f"the page read the task again for what its events carry: {reads}"


async def test_the_dashboard_shows_each_question_without_reading_the_tasks(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("question"))
    first = await lc.open_issue("Add a cache", "Make the export faster.")
    await lc.work()
    gui = await gui_factory(lc.api, sign_in=False)
    reads = task_reads(gui)  # from the first load on: the Board's list has the question
    await gui.sign_in()
    page = gui.page
    await page.wait_for_selector("body[data-live=stream]")  # no event can be missed now
    await gui.screen("dashboard")
    await (
        page.locator("#dash-waiting .row", has_text=f"#{first}")
        .locator("q.why", has_text=ASKED)
        .wait_for()
    )

    second = await lc.open_issue("Add another cache", "Make the import faster.")
    await lc.work()  # starts waiting while the Dashboard is open: the `task` event says it
    live = page.locator("#dash-waiting .row", has_text=f"#{second}")
    await live.locator("q.why", has_text=ASKED).wait_for()
    assert reads == [], f"the Dashboard read the tasks for their questions: {reads}"
