"""A load that fails is not a sign-out: the chats list answered 503 (the database away for a
moment) on a reload keeps the operator in the app, says what failed, and the list comes back
once the service answers; a list that fails after a turn is no uncaught error."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bot.runtimes.offline import OfflineRuntime
from tests.browser.conftest import GuiFactory
from tests.conftest import make_settings
from tests.fakes.patience import PATIENCE_SECONDS

UNAVAILABLE = json.dumps(
    {"error": "the database is unavailable: try again", "code": "unavailable", "detail": None}
)
# Every toast the page shows, told to the test as it is added: an error toast expires after
# 20 s, which a loaded machine can spend between the reload and a look at the page.
TOASTS_TOLD = """
(() => {
  const watch = () => new MutationObserver(records => {
    for (const r of records) for (const n of r.addedNodes) window.sawToast(n.textContent);
  }).observe(document.querySelector('#toasts'), {childList: true});
  if (document.querySelector('#toasts')) watch();
  else window.addEventListener('DOMContentLoaded', watch);
})()
"""


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

    said: list[str] = []
    failed = asyncio.Event()

    def saw_toast(text: str) -> None:
        said.append(text)
        if "Your chats could not load" in text:
            failed.set()

    await page.expose_function("sawToast", saw_toast)
    await page.add_init_script(TOASTS_TOLD)
    await page.route("**/api/operator/chat/sessions", refuse_once)
    await page.reload()
    await page.wait_for_selector("body[data-ready=true]")
    assert refused
    # Still signed in (the session cookie is good): the app, not the sign-in card.
    await page.wait_for_selector("#app:not([hidden])")
    assert await page.is_hidden("#signin")
    await asyncio.wait_for(failed.wait(), PATIENCE_SECONDS)
    [error] = [text for text in said if "Your chats could not load" in text]
    assert "the database is unavailable: try again" in error
    # The list comes back by itself once the service answers (the live stream's reload).
    await page.locator("#session-list .session", has_text="what runs on Mondays?").wait_for()
    assert not [e for e in gui.console_errors if e.startswith("pageerror")]


async def test_a_proxys_503_says_the_service_cannot_be_reached(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """A proxy's page (not the service's error JSON) for a stopped service: the operator is
    told the service cannot be reached, not "request failed (503)"."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    proxy_page = "<html><body><h1>503 Service Temporarily Unavailable</h1>nginx</body></html>"

    async def proxy(route: Any) -> None:
        await route.fulfill(status=503, content_type="text/html", body=proxy_page)

    await page.route("**/api/operator/chat/sessions", proxy)
    await page.reload()
    await page.wait_for_selector("#app:not([hidden])")
    error = page.locator("#toasts .toast.error", has_text="Your chats could not load")
    await error.wait_for()
    assert "the service cannot be reached" in await error.inner_text()


async def test_a_message_a_proxy_refuses_is_offline_not_sent(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """The turn's stream answered by a proxy's 503 page: the message was not sent, as with
    no network, and stays in the box to send again."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page

    async def proxy(route: Any) -> None:
        await route.fulfill(status=503, content_type="text/html", body="<h1>503</h1>")

    await page.route("**/api/operator/chat/stream*", proxy)
    await page.fill("#message", "what runs on Mondays?")
    await page.press("#message", "Enter")
    await page.wait_for_function(
        "() => document.querySelector('#status-line').textContent === 'offline: not sent'"
    )
    assert await page.input_value("#message") == "what runs on Mondays?"


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


async def test_a_board_and_chats_that_failed_to_load_say_so_in_place(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """After the notification has faded the screens still say what failed (not a blank
    Board, an empty Dashboard or a bare sidebar), and Try again loads them."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    await api.post("/api/operator/chat/new", json={"title": "kept chat"})
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    down = {"now": True}

    async def refuse_while_down(route: Any) -> None:
        if down["now"]:
            await route.fulfill(status=503, content_type="application/json", body=UNAVAILABLE)
        else:
            await route.continue_()

    await page.route("**/api/operator/board?*", refuse_while_down)
    await page.route("**/api/operator/chat/sessions", refuse_while_down)
    await gui.sign_in()
    await page.wait_for_selector("body[data-live=stream]")  # its reload failed too
    said = "the database is unavailable: try again"
    sidebar = page.locator("#session-list .load-failed")
    assert f"Your chats could not load: {said}." in await sidebar.inner_text()
    await page.evaluate("() => document.querySelector('#toasts').replaceChildren()")  # faded
    await gui.screen("board")
    board = page.locator("#board-columns .load-failed")
    assert f"The Board could not load: {said}." in await board.inner_text()
    await gui.screen("dashboard")
    dashboard = page.locator("#dash-outcomes .load-failed")
    assert f"The Dashboard could not load: {said}." in await dashboard.inner_text()

    down["now"] = False
    await dashboard.get_by_role("button", name="Try again").click()
    await page.locator("#dash-delivered .empty").wait_for()  # "No pull requests delivered yet."
    await gui.screen("board")
    await page.locator("#board-columns .column").first.wait_for()
    await sidebar.get_by_role("button", name="Try again").click()
    await page.locator("#session-list .session", has_text="kept chat").wait_for()
