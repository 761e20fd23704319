"""axe-core (vendored from npm, injected by the test) finds no serious or critical
violation on any screen, in light and dark; and the loop's core works from the keyboard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.clock import utcnow
from bot.lifecycle import egress_blocked
from bot.lifecycle.egress_blocked import BlockedHost
from tests.browser.conftest import AXE, Gui, GuiFactory
from tests.conftest import make_settings
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def check(gui: Gui, screen: str) -> None:
    violations = await gui.axe()
    assert violations == [], f"{screen}: {violations}"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(
    "viewport",
    [{"width": 1280, "height": 800}, {"width": 390, "height": 844}],
    ids=["laptop", "phone"],
)
async def test_every_screen_passes_axe(
    make: Make, gui_factory: GuiFactory, scheme: Any, viewport: dict[str, int]
) -> None:
    lc = await make(coding_command=command("question"))
    issue = await lc.open_issue("Add a cache", "Make the export faster.")
    await lc.work()
    task = lc.task(issue)  # a run that was refused a host: the run modal lists it
    refused = BlockedHost("example.org", 443, utcnow(), 3, "not on this run's allowlist")
    lc.ctx.db.call(egress_blocked.add, task.id, task.generation, task.attempts, [refused])
    gui = await gui_factory(lc.api, sign_in=False, color_scheme=scheme)
    await gui.page.set_viewport_size(viewport)
    await gui.open()
    await gui.page.wait_for_selector("#signin:not([hidden])")
    await check(gui, "sign-in")
    phone = "-phone" if viewport["width"] < 760 else ""
    await gui.screenshot(f"signin-{scheme}{phone}")
    await gui.sign_in()
    await check(gui, "empty chat")
    await gui.page.fill("#focus-input", str(issue))
    await gui.page.click("#focus-form button")
    await gui.send("draft a decision: Use Redis.")
    await gui.wait_done()
    await gui.page.wait_for_selector("#publish-bar:not([hidden])")
    await gui.page.locator("details.thinking summary").last.click()
    await check(gui, "chat with a reply and the Publish bar")
    await gui.screenshot(f"chat-{scheme}{phone}")
    await gui.screen("board")
    await gui.page.wait_for_selector(f".card[data-issue='{issue}']")
    await check(gui, "board")
    await gui.page.click(f".card[data-issue='{issue}'] .card-open")
    await gui.page.locator("#run-modal").wait_for(state="visible")
    blocked = await gui.page.locator("#run-modal .blocked").inner_text()
    assert "example.org:443 · 3 requests · attempt 1" in blocked
    await check(gui, "run modal")
    await gui.page.keyboard.press("Escape")
    await gui.screen("dashboard")
    await check(gui, "dashboard")


async def test_the_chat_works_from_the_keyboard(make: Make, gui_factory: GuiFactory) -> None:
    lc = await make()
    gui = await gui_factory(lc.api)
    page = gui.page
    # Signed in, the composer has the focus; from anywhere else "/" brings it back.
    await page.wait_for_function("() => document.activeElement?.id === 'message'")
    await page.evaluate("document.activeElement.blur()")
    await page.keyboard.press("/")  # focuses the composer
    assert await page.evaluate("document.activeElement.id") == "message"
    await page.keyboard.type("first line")
    await page.keyboard.press("Shift+Enter")
    await page.keyboard.type("second line")
    assert await page.input_value("#message") == "first line\nsecond line"
    await page.keyboard.press("Enter")
    await gui.wait_done()
    assert "first line\nsecond line" in await page.locator(".msg.user").inner_text()
    # Tab reaches the screens' tabs, and each has a visible focus ring.
    for _ in range(40):
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement.id") == "tab-board":
            break
    else:
        raise AssertionError("the Board tab is not reachable with Tab")
    outline = await page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#screen-board:not([hidden])")


async def test_keyboard_only_from_sign_in_to_publish(make: Make, gui_factory: GuiFactory) -> None:
    """Sign in, focus an issue, ask for a Decision and publish it without a mouse, in at most
    25 key presses besides the text typed."""
    lc = await make()
    issue = await lc.open_issue("Add a cache", "Make the export faster.", pickup=False)
    gui = await gui_factory(lc.api, sign_in=False)
    page = gui.page
    await gui.open()
    presses = 0

    async def press(key: str) -> str:
        nonlocal presses
        presses += 1
        await page.keyboard.press(key)
        return str(await page.evaluate("document.activeElement.id"))

    async def tab_back_to(target: str) -> None:
        for _ in range(12):
            if await press("Shift+Tab") == target:
                return
        raise AssertionError(f"#{target} is not reachable with Shift+Tab")

    assert await page.evaluate("document.activeElement.id") == "token"
    await page.keyboard.type(lc.api.token)
    await press("Enter")
    await page.wait_for_function("() => document.activeElement?.id === 'message'")
    await tab_back_to("focus-input")
    await page.keyboard.type(str(issue))
    await press("Enter")
    await page.wait_for_selector("#focus-chip:not([hidden])")
    assert await press("/") == "message"
    await page.keyboard.type("draft a decision: Use Redis.")
    await press("Enter")
    await page.wait_for_selector("#publish-bar:not([hidden])")
    await gui.wait_done()
    await tab_back_to("publish")
    await press("Enter")
    await page.locator("#toasts .toast", has_text=f"Published the Decision to #{issue}").wait_for()
    assert presses <= 25, presses


async def test_deleting_a_chat_from_the_keyboard_keeps_the_place_in_the_list(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """Delete on a session deletes it after the confirmation; the focus goes to the session
    that took its place (the one below, or above at the end of the list), not to the page's
    start, where a keyboard user would have to Tab through everything again; and a redraw
    of the list (a `session` event) leaves it where it is."""
    api = await api_factory(make_settings(tmp_path))
    for title in ("first", "second", "third"):  # newest first: third, second, first
        assert (await api.post("/api/operator/chat/new", json={"title": title})).status == 201
    gui = await gui_factory(api)
    page = gui.page
    await page.wait_for_selector("body[data-live=stream]")  # a chat made now is listed live
    await page.locator("#session-list .session", has_text="first").wait_for()

    async def focus_goes_to(text: str) -> None:
        await page.wait_for_function("t => document.activeElement?.textContent === t", arg=text)

    async def delete_focused(title: str) -> None:
        await page.focus(f"#session-list .session:has-text('{title}') .session-open")
        await page.keyboard.press("Delete")
        await page.locator("#session-list .session", has_text=title).wait_for(state="detached")

    await delete_focused("second")
    await focus_goes_to("first")  # the next one down
    made = await api.post("/api/operator/chat/new", json={"title": "fourth"})  # redraws the list
    assert made.status == 201
    await page.locator("#session-list .session", has_text="fourth").wait_for()
    await focus_goes_to("first")
    await delete_focused("first")
    await focus_goes_to("third")  # the last one: the one above
    assert any("Delete the chat" in d for d in gui.dialogs)


async def test_every_screen_has_a_level_one_heading(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """Screen reader users move by headings: each screen has its `h1` (axe's moderate
    `page-has-heading-one`, which the serious-and-critical check above lets through)."""
    api = await api_factory(make_settings(tmp_path))
    gui = await gui_factory(api)
    await gui.page.evaluate(AXE.read_text() + "\n;0")
    for screen in ("chat", "board", "dashboard"):
        await gui.screen(screen)
        found = await gui.page.evaluate(
            "async () => (await axe.run(document, {runOnly: ['page-has-heading-one']}))"
            ".violations.map(v => v.id)"
        )
        assert found == [], screen
        shown = await gui.page.evaluate(
            "() => [...document.querySelectorAll('h1')].filter(e => e.closest('[hidden]') === null)"
            ".map(e => e.textContent)"
        )
        assert shown == [screen.capitalize()], screen
