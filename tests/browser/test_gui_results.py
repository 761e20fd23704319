"""Task results from the events stream: where the operator is, and in the originating
session, exactly once (live, after a reload, and with the stream resumed); told by a
notification only where the open chat does not show it already."""

from __future__ import annotations

import re

from tests.browser.conftest import Gui, GuiFactory
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

# Every notification ever added, even one taken away at once (a flash is told too: the
# region is aria-live).
WATCH_TOASTS = """() => {
  window.toastsShown = [];
  new MutationObserver(records => {
    for (const r of records) for (const n of r.addedNodes) window.toastsShown.push(n.textContent);
  }).observe(document.querySelector('#toasts'), {childList: true});
}"""
# app.js RESULT_WAIT_MS: how long a state change waits for its result before it is told.
RESULT_WAIT_MS = 1000


async def toasts_shown(gui: Gui) -> list[str]:
    shown: list[str] = await gui.page.evaluate("() => window.toastsShown")
    return shown


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
    await page.evaluate(WATCH_TOASTS)
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
    # The task's state change came too (its card moved), and past the time it waits for its
    # result it has not been told either: the result in the chat said it.
    card = f".column[data-state='delivered'] .card[data-issue='{issue}']"
    await page.wait_for_selector(card, state="attached")  # on the Board, not shown
    await page.wait_for_timeout(2 * RESULT_WAIT_MS)
    told = [t for t in await toasts_shown(gui) if f"#{issue}" in t]
    # The question, told elsewhere: once, its state change ("waiting for you") not again
    # after its notification was clicked away.
    assert len(told) == 1 and "has a question" in told[0], told
    await page.reload()
    await page.wait_for_selector("#messages .msg.assistant")
    assert await page.locator("#messages .msg.assistant", has_text="delivered").count() == 1
    assert await page.locator("#messages .msg.assistant", has_text="Should the cache").count() == 1


async def test_a_result_in_the_open_chat_is_notified_while_the_board_is_shown(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("question"))
    gui = await gui_factory(lc.api)
    page = gui.page
    await page.evaluate(WATCH_TOASTS)
    issue = await file_an_issue(gui)
    await gui.screen("board")  # the chat stays open behind the Board
    await lc.settle()
    await lc.work()  # the coding agent asks a question: a `result` in the open chat
    toast = page.locator("#toasts .toast", has_text="has a question")
    await toast.wait_for()
    assert f"#{issue}" in await toast.inner_text()
    await page.wait_for_timeout(2 * RESULT_WAIT_MS)  # the state change, the same news, waited
    told = [t for t in await toasts_shown(gui) if f"#{issue}" in t]
    assert len(told) == 1, told  # once: the state change and the result are one notification
    await gui.screen("chat")
    question = page.locator("#messages .msg.assistant", has_text="Should the cache use Redis")
    assert await question.count() == 1
