"""A load that fails is not a sign-out: the chats list answered 503 (the database away for a
moment) on a reload keeps the operator in the app, says what failed, and the list comes back
once the service answers; a list that fails after a turn is no uncaught error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.runtimes.offline import OfflineRuntime
from tests.browser.conftest import GuiFactory
from tests.conftest import make_settings

UNAVAILABLE = json.dumps(
    {"error": "the database is unavailable: try again", "code": "unavailable", "detail": None}
)


async def test_a_chats_list_refused_on_reload_is_no_sign_out(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    await gui.send("what runs on Mondays?")
    await gui.wait_done()
    refused: list[str] = []

    async def refuse_once(route: Any) -> None:
        if refused:  # the service is back: later lists come as asked
            await route.continue_()
            return
        refused.append(route.request.url)
        await route.fulfill(status=503, content_type="application/json", body=UNAVAILABLE)

    await page.route("**/api/operator/chat/sessions", refuse_once)
    await page.reload()
    await page.wait_for_selector("body[data-ready=true]")
    assert refused
    # Still signed in (the session cookie is good): the app, not the sign-in card.
    await page.wait_for_selector("#app:not([hidden])")
    assert await page.is_hidden("#signin")
    error = page.locator("#toasts .toast.error", has_text="Your chats could not load")
    await error.wait_for()
    assert "the database is unavailable: try again" in await error.inner_text()
    # The list comes back by itself once the service answers (the live stream's reload).
    await page.locator("#session-list .session", has_text="what runs on Mondays?").wait_for()
    assert not [e for e in gui.console_errors if e.startswith("pageerror")]


async def test_a_list_refused_after_a_turn_is_no_uncaught_error(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page

    async def refuse(route: Any) -> None:
        await route.fulfill(status=503, content_type="application/json", body=UNAVAILABLE)

    await page.route("**/api/operator/chat/sessions", refuse)
    await gui.send("what runs on Mondays?")
    await gui.wait_done()
    await page.keyboard.press("Control+k")  # a new chat lists the chats again
    await page.wait_for_function(
        "() => document.querySelector('#chat-title').textContent == 'New chat'"
    )
    await page.locator("#messages #chat-empty").wait_for()
    await page.unroute("**/api/operator/chat/sessions")
    await gui.send("and on Tuesdays?")  # the page still works, and lists once it can
    await gui.wait_done()
    await page.locator("#session-list .session", has_text="and on Tuesdays?").wait_for()
    assert not [e for e in gui.console_errors if e.startswith("pageerror")], gui.console_errors


async def test_a_sign_in_check_that_fails_says_so(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """Not a 401: the page cannot tell whether the operator is signed in, and says why
    instead of showing a bare sign-in card."""
    api = await api_factory(make_settings(tmp_path))
    gui = await gui_factory(api)
    page = gui.page

    async def refuse(route: Any) -> None:
        await route.fulfill(status=503, content_type="application/json", body=UNAVAILABLE)

    await page.route("**/gui/session", refuse)
    await page.reload()
    await page.wait_for_selector("body[data-ready=true]")
    await page.wait_for_selector("#signin:not([hidden])")
    said = await page.inner_text("#signin-error")
    assert said == (
        "Could not check your sign-in: the database is unavailable: try again. Reload to try again."
    )
    await page.unroute("**/gui/session")
    await page.reload()  # the service answers again: still signed in
    await page.wait_for_selector("#app:not([hidden])")
