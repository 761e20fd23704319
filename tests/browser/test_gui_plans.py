"""Issue 34 in Chromium: Discuss on a plan-first task shows its plan, with an "Approve
plan" button in the Publish bar that resumes the task with the plan as written; Discuss on
a question answered before offers that Decision, cited, as the draft; the Board's cards
show the tokens and cost the runtime reported."""

from __future__ import annotations

from pathlib import Path

from bot.lifecycle.plan_flow import PLAN_LABEL
from bot.lifecycle.states import TaskState
from tests.browser.conftest import WAIT_MS, Gui, GuiFactory
from tests.browser.test_gui_loop import page_errors, wait_card
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, PICKUP, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir


async def _discuss(gui: Gui, issue: int) -> None:
    await gui.screen("board")
    await wait_card(gui, issue, "waiting_for_info")
    await gui.page.click(f".card[data-issue='{issue}'] button.discuss")
    await gui.page.wait_for_selector("#screen-chat:not([hidden])")


async def test_discuss_shows_the_plan_and_approve_plan_resumes_the_task(
    make: Make, gui_factory: GuiFactory, tmp_path: Path
) -> None:
    lc = await make(coding_command=command("planner", exchange_dir(tmp_path)))
    made = await lc.github.create_issue(
        lc.repo, title="Make the widget blue", body="It is red.", labels=[PICKUP, PLAN_LABEL]
    )
    issue = made.number
    await lc.settle()
    await lc.work()
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO
    gui = await gui_factory(lc.api)
    await _discuss(gui, issue)
    panel = gui.page.locator("#messages .offer")
    await panel.wait_for()
    assert "Approach: make the widget blue" in await panel.locator(".plan").inner_text()
    await gui.page.locator("#publish-bar").wait_for(state="visible")
    assert "Approach: make the widget blue" in await gui.page.input_value("#decision-text")
    approve = gui.page.locator("#approve-plan")
    assert await approve.is_visible()
    await gui.screenshot("chat-plan")
    await approve.click()
    await gui.page.wait_for_selector("#publish-bar", state="hidden", timeout=WAIT_MS)
    marked = [c["body"] for c in await lc.comments(issue) if c["body"].startswith(DECISION)]
    assert len(marked) == 1 and "Approve plan" in marked[0]
    await lc.settle()
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    (pull,) = await lc.pulls()
    assert "### Approved plan" in pull["body"]
    assert "edited by the operator" not in pull["body"]  # approved as written
    await gui.screen("board")
    await wait_card(gui, issue, "delivered")
    card = gui.page.locator(f".card[data-issue='{issue}']")
    # The plan run's 400 tokens and the coding run's 1,200, and their cost.
    assert await card.locator(".tokens").inner_text() == "1,600 tokens"
    assert await card.locator(".cost").inner_text() == "$0.06"
    # The Dashboard's spend chart: the repository's tokens and cost of the last 14 days.
    await gui.screen("dashboard")
    row = gui.page.locator(f"#dash-spend li.spend[data-repo='{lc.repo}']")
    await row.locator(".spend-total", has_text="1,600 tokens · $0.06").wait_for()
    assert await row.locator(".spend-bars rect").count() == 14
    assert not page_errors(gui)


async def test_discuss_offers_the_decision_that_answered_the_same_question(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("question"))
    first = await lc.open_issue("Add a cache")
    await lc.work()
    await lc.comment_as("maintainer", first, f"{DECISION}\nUse SQLite.", "write")
    await lc.work()
    second = await lc.open_issue("Add a cache to the importer")
    await lc.work()
    gui = await gui_factory(lc.api)
    await _discuss(gui, second)
    offered = gui.page.locator("#messages .offer .offered li")
    await offered.first.wait_for()
    assert await offered.count() == 1
    assert f"#{first} (" in await offered.locator(".cite").inner_text()
    assert await offered.locator(".offered-decision").inner_text() == "Use SQLite."
    await gui.page.locator("#publish-bar").wait_for(state="visible")
    draft = await gui.page.input_value("#decision-text")
    assert draft.startswith("Use SQLite.") and f"#{first}" in draft
    assert not await gui.page.locator("#approve-plan").is_visible()
    # Offered, not published: only the operator's Publish posts it.
    assert not [c for c in await lc.comments(second) if c["body"].startswith(DECISION)]
    await gui.page.click("#publish")
    await gui.page.wait_for_selector("#publish-bar", state="hidden", timeout=WAIT_MS)
    await lc.settle()
    assert lc.task(second).pending_decision is not None
    assert lc.task(second).pending_decision.startswith("Use SQLite.")  # type: ignore[union-attr]
    assert not page_errors(gui)
