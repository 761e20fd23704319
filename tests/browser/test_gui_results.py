"""Task results from the events stream: where the operator is, and in the originating
session, exactly once (live, after a reload, and with the stream resumed)."""

from __future__ import annotations

import re

from tests.browser.conftest import GuiFactory
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def test_results_reach_their_session_exactly_once(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("question"))
    gui = await gui_factory(lc.api)
    page = gui.page
    await gui.send("file an issue for Add a cache to the export job")
    await gui.wait_done()
    reply = await page.locator("#messages .msg.assistant").last.inner_text()
    issue = int(re.search(r"Filed as #(\d+)", reply)[1])  # type: ignore[index]
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
