"""The sidebar and the Board's Archive in Chromium, as issue 32 asks: the unseen-result dot is
kept on the server (it survives a reload and goes once the chat is opened), sessions are
titled by their subject (not "file an issue for the…"), empty chats do not pile up, Archive
says what it did and can be undone, and Stop pressed too late says #N was already filed; and a
chat made between the page's loads and its live stream's opening is listed all the same."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from tests.browser.conftest import WAIT_MS, Gui, GuiFactory
from tests.browser.test_gui_loop import wait_card
from tests.conftest import make_settings
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.turn_relay import HeldOpen


async def sessions(gui: Gui) -> list[dict[str, Any]]:
    listed = (await (await gui.api.get("/api/operator/chat/sessions")).json())["sessions"]
    return list(listed)


async def reload(gui: Gui) -> None:
    await gui.page.reload()
    await gui.page.wait_for_selector("#app:not([hidden])", timeout=WAIT_MS)
    await gui.page.wait_for_selector("#session-list .session", timeout=WAIT_MS)


async def test_the_unseen_dot_titles_empty_chats_and_archive_undo(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("question"))
    gui = await gui_factory(lc.api)
    page = gui.page
    await gui.send("file an issue for the flaky login test")
    await gui.wait_done()
    reply = await page.locator("#messages .msg.assistant").last.inner_text()
    issue = int(re.search(r"Filed as #(\d+)", reply)[1])  # type: ignore[index]
    origin = await page.get_attribute("#session-list .session.current", "data-session")
    # Titled by what was filed, in the sidebar and the header.
    title = page.locator(f"[data-session='{origin}'] .session-title")
    assert await title.inner_text() == "Flaky login test"
    assert await page.inner_text("#chat-title") == "Flaky login test"

    # New chat, three times, across a reload: one empty chat, never a pile of them.
    await page.click("#new-chat")
    await page.wait_for_function("() => !document.querySelector('#messages .msg')")
    await page.click("#new-chat")
    await reload(gui)
    await page.click("#new-chat")
    await page.wait_for_function("() => !document.querySelector('#messages .msg')")
    listed = await sessions(gui)
    assert [s["id"] for s in listed if not s["turns"]] == [
        await page.get_attribute("#session-list .session.current", "data-session")
    ]
    assert await page.locator("#session-list .session").count() == 2

    # A result lands in the filing chat while another is shown: a dot, kept on the server.
    await lc.settle()
    await lc.work()  # the coding agent asks a question: a result in the origin session
    await page.wait_for_selector(f"[data-session='{origin}'] .dot")
    assert [s["unseen"] for s in await sessions(gui) if s["id"] == origin] == [True]
    await reload(gui)
    await page.wait_for_selector(f"[data-session='{origin}'] .dot")  # survives the reload
    await page.click(f"[data-session='{origin}'] .session-open")
    await page.locator("#messages .msg.assistant", has_text="Should the cache").wait_for()
    assert await page.locator(f"[data-session='{origin}'] .dot").count() == 0
    await reload(gui)
    assert await page.locator(f"[data-session='{origin}'] .dot").count() == 0
    assert [s["unseen"] for s in await sessions(gui) if s["id"] == origin] == [False]

    # Delivered while the chat is open: shown in place and seen, so no dot after a reload.
    async with page.expect_response(lambda r: r.url.endswith(f"/{origin}/seen")) as said:
        published = await lc.api.post(
            "/api/operator/chat/decision", json={"issue": issue, "body": "Use Redis."}
        )
        assert published.status == 200
        await lc.settle()
        await lc.work()
        await page.locator("#messages .msg.assistant", has_text="delivered").wait_for()
    assert (await said.value).status == 200
    assert [s["unseen"] for s in await sessions(gui) if s["id"] == origin] == [False]

    # Archive says what it did, and Undo brings the card back to its column.
    await gui.screen("board")
    await wait_card(gui, issue, "delivered")
    await page.click(f".card[data-issue='{issue}'] button.archive")
    await wait_card(gui, issue, "archived")
    toast = page.locator("#toasts .toast", has_text=f"Archived #{issue}")
    await toast.wait_for()
    await toast.locator("button", has_text="Undo").click()
    await wait_card(gui, issue, "delivered")
    await page.locator("#toasts .toast", has_text=f"#{issue} is back on the Board").wait_for()
    board = await (await lc.api.get("/api/operator/board")).json()
    assert [t["archived"] for t in board["tasks"] if t["issue"] == issue] == [False]


async def test_stop_pressed_while_the_issue_is_being_filed_says_it_came_too_late(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("question"))
    filing = lc.api.services.filing
    creating, release = asyncio.Event(), asyncio.Event()
    create = filing._create

    async def held_on_github(request: dict[str, Any]) -> dict[str, Any]:
        creating.set()  # the model has answered; the issue is being made on GitHub
        await release.wait()
        return await create(request)

    filing._create = held_on_github
    gui = await gui_factory(lc.api)
    page = gui.page
    await gui.send("file an issue for the slow export")
    await asyncio.wait_for(creating.wait(), WAIT_MS / 1000)
    await page.click("#stop")
    await page.wait_for_function(
        "() => document.querySelector('#status-line').textContent.startsWith('too late to stop')"
    )
    release.set()
    await gui.wait_done()
    repo = lc.sandbox.sandbox.world.repo(lc.repo)
    assert repo is not None
    [number] = [n for n, i in repo.issues.items() if i.title == "the slow export"]
    late = f"Stop came too late: #{number} was already filed."
    await page.locator("#toasts .toast", has_text=late).wait_for()
    assert await page.inner_text("#status-line") == f"too late to stop: #{number} was already filed"
    # The reply and its filing are kept (the turn was not stopped).
    assert f"Filed as #{number}" in await page.locator("#messages .msg.assistant").last.inner_text()


async def test_a_chat_made_before_the_live_stream_opened_is_listed(
    api_factory: Any, gui_factory: GuiFactory, tmp_path: Path
) -> None:
    """The page loads its sessions, then opens the events stream, which starts "now": a chat
    made in between shows once the stream is open (it reloads what it shows then)."""
    held = HeldOpen("/api/operator/events")
    api = await api_factory(make_settings(tmp_path), plugins=held.plugins())
    gui = await gui_factory(api)
    async with asyncio.timeout(WAIT_MS / 1000):
        await held.asked.wait()
    made = await (await api.post("/api/operator/chat/new", json={"title": "meanwhile"})).json()
    held.release.set()
    await gui.page.wait_for_selector("body[data-live=stream]", timeout=WAIT_MS)
    await gui.page.wait_for_selector(f"#session-list [data-session='{made['id']}']")
