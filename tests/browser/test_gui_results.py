"""Task results from the events stream: where the operator is, and in the originating
session, exactly once (live, after a reload, and with the stream resumed); told by a
notification only where the open chat does not show them."""

from __future__ import annotations

import re

from tests.browser.conftest import Gui, GuiFactory
from tests.browser.test_gui_layout import DESKTOP_SPY
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

# Every notification the page adds, even one taken away at once (the region is aria-live:
# a flash is told too).
WATCH_TOASTS = """() => {
  window.toastsShown = [];
  new MutationObserver(records => {
    for (const r of records) for (const n of r.addedNodes) window.toastsShown.push(n.textContent);
  }).observe(document.querySelector('#toasts'), {childList: true});
}"""


async def told_about(gui: Gui, issue: int) -> list[str]:
    shown: list[str] = await gui.page.evaluate("() => window.toastsShown")
    return [text for text in shown if f"#{issue}" in text]


async def file_an_issue(gui: Gui) -> int:
    await gui.send("file an issue for Add a cache to the export job")
    await gui.wait_done()
    reply = await gui.page.locator("#messages .msg.assistant").last.inner_text()
    return int(re.search(r"Filed as #(\d+)", reply)[1])  # type: ignore[index]


async def test_results_reach_their_session_exactly_once(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("question"))
    gui = await gui_factory(lc.api)
    page = gui.page
    issue = await file_an_issue(gui)
    origin = await page.get_attribute("#session-list .session.current", "data-session")
    await page.keyboard.press("Control+k")  # elsewhere: a new, empty chat
    await page.wait_for_function("() => !document.querySelector('#messages .msg')")
    await lc.settle()
    await lc.work()  # the coding agent asks a question: a `result` event
    toast = page.locator("#toasts .toast", has_text="has a question")
    await toast.wait_for()
    await page.wait_for_selector(f"[data-session='{origin}'] .dot")
    await toast.locator("button", has_text="Open chat").click()
    question = page.locator("#messages .msg.assistant", has_text="Should the cache use Redis")
    await question.wait_for()
    assert await question.count() == 1
    # Delivered while the session is open: it appears in place, once, without a toast.
    published = await lc.api.post(
        "/api/operator/chat/decision", json={"issue": issue, "body": "Use Redis."}
    )
    assert published.status == 200
    await lc.settle()
    await lc.work()
    delivered = page.locator("#messages .msg.assistant", has_text="delivered")
    await delivered.wait_for()
    assert await delivered.count() == 1
    await page.reload()
    await page.wait_for_selector("#messages .msg.assistant")
    assert await page.locator("#messages .msg.assistant", has_text="delivered").count() == 1
    assert await page.locator("#messages .msg.assistant", has_text="Should the cache").count() == 1


async def test_a_result_in_the_open_chat_is_told_once_by_the_chat_alone(
    make: Make, gui_factory: GuiFactory
) -> None:
    """The task's state change and its result are one piece of news. In the chat open in
    front of the operator the result tells it, so the change's own notification never shows,
    not even for a moment; with the Board in front, one notification tells it. No waiting
    for time to pass: the stream carries the change before its result, so once the result
    is on the page the change was handled."""
    lc = await make(coding_command=command("question"))
    gui = await gui_factory(lc.api)
    page = gui.page
    await page.evaluate(WATCH_TOASTS)
    issue = await file_an_issue(gui)
    await lc.settle()
    await lc.work()  # the coding agent asks: waiting_for_info, then its result in this chat
    question = page.locator("#messages .msg.assistant", has_text="Should the cache use Redis")
    await question.wait_for()
    waiting = f".column[data-state='waiting_for_info'] .card[data-issue='{issue}']"
    await page.wait_for_selector(waiting, state="attached")  # the change came (Board hidden)
    assert await told_about(gui, issue) == []
    await gui.screen("board")  # the chat stays open behind the Board: not in front
    published = await lc.api.post(
        "/api/operator/chat/decision", json={"issue": issue, "body": "Use Redis."}
    )
    assert published.status == 200
    await lc.settle()
    await lc.work()  # delivered, and its result in the chat behind the Board
    # The result's words in the notification: the change (before it) and the result were
    # both handled, as one notification.
    await page.locator("#toasts .toast", has_text="delivered: Task").wait_for()
    told = await told_about(gui, issue)
    assert len(told) == 1 and "delivered" in told[0], told
    await gui.screen("chat")
    assert await page.locator("#messages .msg.assistant", has_text="was delivered").count() == 1


async def test_a_result_in_the_open_chat_of_a_hidden_tab_is_notified(
    make: Make, gui_factory: GuiFactory
) -> None:
    """The tab hidden, the open chat is not in front of the operator: the change and its
    result are one notification (and one desktop alert), in the result's words."""
    lc = await make(coding_command=command("question"))
    gui = await gui_factory(lc.api, permissions=["notifications"])
    page = gui.page
    await page.evaluate(DESKTOP_SPY)
    issue = await file_an_issue(gui)
    await page.evaluate("() => { window.__hidden = true; }")  # the operator looks elsewhere
    await lc.settle()
    await lc.work()
    question = page.locator("#messages .msg.assistant", has_text="Should the cache use Redis")
    await question.wait_for()  # the result came, after its change
    toasts = page.locator("#toasts .toast", has_text=f"#{issue}")
    assert await toasts.count() == 1
    assert "has a question: Task" in await toasts.inner_text()
    desktop = await page.evaluate("window.__desktop")
    assert len([d for d in desktop if f"#{issue}" in d]) == 1, desktop
