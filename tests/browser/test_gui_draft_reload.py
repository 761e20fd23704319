"""What the operator was typing survives a reload of the tab: the composer holds it again
(a message sent is not brought back), another operator signing in on the tab never sees it,
and Sign out forgets it (docs/gui.md "Composer")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.runtimes.offline import OfflineRuntime
from tests.browser.conftest import GuiFactory
from tests.conftest import make_settings

DRAFT = "The export job fails on Mondays because\nthe fx table"


async def test_a_reload_keeps_the_unsent_message(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    await page.fill("#message", DRAFT)
    await page.reload()
    await page.wait_for_selector("#app:not([hidden])")
    await page.wait_for_function("() => document.querySelector('#message').value !== ''")
    assert await page.input_value("#message") == DRAFT

    # Sent, it is no draft: the next reload brings an empty box.
    await page.press("#message", "Enter")
    await gui.wait_done()
    await page.reload()
    await page.wait_for_selector("#messages .msg.assistant")
    assert await page.input_value("#message") == ""

    # Another operator on this tab never sees it; Sign out forgets it.
    await page.fill("#message", "only mine")
    await page.click("#sign-out")
    await page.wait_for_selector("#signin:not([hidden])")
    other = api.new_operator("other")
    await page.reload()
    await page.wait_for_selector("body[data-ready=true]")
    await gui.sign_in(other.token)
    assert await page.input_value("#message") == ""
    await page.click("#sign-out")
    await gui.sign_in()
    assert await page.input_value("#message") == ""


async def test_a_reload_keeps_a_focus_set_but_not_yet_sent(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """A focus goes with the next message (the API's rule): set and not yet sent, a reload
    lost it, and the message kept in the box then went without it."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    await gui.send("a chat to come back to")
    await gui.wait_done()
    await page.fill("#focus-input", "7")
    await page.click("#focus-form button")
    await page.fill("#message", "what blocks #7?")
    await page.reload()
    await page.wait_for_selector("#messages .msg.assistant")
    await page.wait_for_selector("#focus-chip:not([hidden])")
    assert await page.inner_text("#focus-text") == "focus: #7"
    await page.press("#message", "Enter")
    await gui.wait_done()
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert sessions[0]["focus"] == 7
