"""The Dashboard's spend chart and the Board's cards read money alike (issue 34): a
sub-cent spend is "<$0.01" on both, never "$0.00" on one of them. Chromium, the real
service, the GitHub sandbox and an RQ worker."""

from __future__ import annotations

from bot.lifecycle.states import TaskState
from tests.browser.conftest import GuiFactory
from tests.browser.test_gui_loop import page_errors, wait_card
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def test_a_sub_cent_spend_reads_the_same_on_the_board_and_the_dashboard(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("commit"))  # 150 tokens, 0.001 USD
    issue = await lc.open_issue("First change")
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    gui = await gui_factory(lc.api)
    await gui.screen("board")
    await wait_card(gui, issue, "delivered")
    card = gui.page.locator(f".card[data-issue='{issue}']")
    assert await card.locator(".cost").inner_text() == "<$0.01"
    await gui.screen("dashboard")
    row = gui.page.locator(f"#dash-spend li.spend[data-repo='{lc.repo}']")
    await row.locator(".spend-total").wait_for()
    assert await row.locator(".spend-total").inner_text() == "150 tokens · <$0.01"
    assert not page_errors(gui)
