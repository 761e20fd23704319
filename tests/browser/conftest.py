"""Browser fixtures: Debian's Chromium driven by Playwright against the real service.

Without /usr/bin/chromium (or STEELFRAME_TEST_CHROMIUM) the browser tests say they did not
run, except under CI=true, where they fail: CI installs the chromium package (.ci/run).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.browser.shared_chromium import ChromiumGone, SharedChromium
from tests.conftest import ApiClient

CHROMIUM = os.environ.get("STEELFRAME_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
AXE = Path(__file__).with_name("vendor") / "axe.min.js"
# Generous: the machine is shared by many developers; conditions are waited on, not timed.
WAIT_MS = 30_000


def chromium_path(configured: str | None = None) -> str:
    wanted = configured or CHROMIUM
    found = wanted if Path(wanted).exists() else shutil.which("chromium")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"Chromium must be installed in CI (apt-get install chromium): {wanted}")
    pytest.skip(f"browser tests did not run: no Chromium at {wanted} (apt-get install chromium)")


def require_playwright() -> None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("browser tests did not run: the playwright package is not installed")


@pytest.fixture(scope="session")
def shared_chromium() -> Iterator[SharedChromium]:
    """This test process's Chromium (tests/browser/shared_chromium.py), stopped at its end."""
    path = chromium_path()
    require_playwright()
    chromium = SharedChromium(path, CHROMIUM_ARGS)
    try:
        yield chromium
    finally:
        chromium.stop()


@pytest.fixture
async def browser(shared_chromium: SharedChromium) -> AsyncIterator[Any]:
    """The shared Chromium, reached by a Playwright of this test's own event loop; the
    contexts the test opens close with it. A Chromium that died during the test fails its
    teardown, saying so; the next test starts a new one."""
    from playwright.async_api import async_playwright

    address = await asyncio.to_thread(shared_chromium.address)
    async with async_playwright() as playwright:
        try:
            connected = await playwright.chromium.connect_over_cdp(
                address.websocket_url, timeout=WAIT_MS
            )
        except Exception as exc:
            shared_chromium.check_alive()  # died: says how
            # Alive but hung: the next test starts a new one rather than fail the same way.
            await asyncio.to_thread(shared_chromium.stop)
            raise ChromiumGone(f"Chromium does not answer at {address.websocket_url}") from exc
        try:
            yield connected
        finally:
            try:
                await connected.close()  # the contexts this connection made, not Chromium
            finally:
                shared_chromium.check_alive()


@dataclass
class Gui:
    """A signed-in page on the service, and what the test watches on it."""

    page: Any
    api: ApiClient
    base: str
    console_errors: list[str]
    dialogs: list[str]
    failed_requests: list[str]

    async def open(self, path: str = "/") -> None:
        await self.page.goto(self.base + path)
        await self.page.wait_for_selector("body[data-ready=true]", timeout=WAIT_MS)

    async def sign_in(self, token: str | None = None) -> None:
        await self.open()
        await self.page.fill("#token", token or self.api.token)
        await self.page.click("#signin-form button[type=submit]")
        await self.page.wait_for_selector("#app:not([hidden])", timeout=WAIT_MS)

    async def screen(self, name: str) -> None:
        await self.page.click(f"#tab-{name}")
        await self.page.wait_for_selector(f"#screen-{name}:not([hidden])", timeout=WAIT_MS)

    async def send(self, text: str) -> None:
        """Type and press Enter, then wait until the composer took the message (it clears):
        Chromium may hand the key to the page after `press` returns, and `wait_done` before
        that would see the Send button of the turn not yet started."""
        await self.page.fill("#message", text)
        await self.page.press("#message", "Enter")
        await self.page.wait_for_function(
            "() => document.querySelector('#message').value === ''", timeout=WAIT_MS
        )

    async def wait_done(self) -> None:
        """The running turn finished (Send is back)."""
        await self.page.wait_for_selector("#send:not([hidden])", timeout=WAIT_MS)

    async def axe(self) -> list[dict[str, Any]]:
        """Serious and critical axe-core violations on the page as it is now."""
        await self.page.evaluate(AXE.read_text() + "\n;0")
        result = await self.page.evaluate(
            "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
            ".filter(v => ['serious','critical'].includes(v.impact))"
            ".map(v => ({id: v.id, impact: v.impact, help: v.help,"
            " nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))"
        )
        return list(result)

    async def screenshot(self, name: str) -> None:
        """Saved only when STEELFRAME_TEST_SCREENSHOTS names a folder (docs/gui.md's images)."""
        folder = os.environ.get("STEELFRAME_TEST_SCREENSHOTS")
        if folder:
            await asyncio.to_thread(Path(folder).mkdir, parents=True, exist_ok=True)
            await self.page.screenshot(path=str(Path(folder) / f"{name}.png"))


GuiFactory = Callable[..., Awaitable[Gui]]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[CALL_FAILED] = report.failed
    return report


CALL_FAILED = pytest.StashKey[bool]()


async def describe_page(gui: Gui) -> str:
    """What a person looking at the page would see, for a failed test's report."""
    shown = await gui.page.evaluate(
        "() => ['#status', '#messages', '#toasts'].map(s => "
        "s + ': ' + (document.querySelector(s)?.innerText ?? '(absent)').slice(-2000))"
    )
    return "\n".join(
        [
            f"page {gui.page.url}",
            *shown,
            f"console errors: {gui.console_errors}",
            f"failed requests: {gui.failed_requests}",
        ]
    )


@pytest.fixture
async def gui_factory(browser: Any, request: pytest.FixtureRequest) -> AsyncIterator[GuiFactory]:
    contexts: list[Any] = []
    guis: list[Gui] = []

    async def make(api: ApiClient, *, sign_in: bool = True, **context: Any) -> Gui:
        context.setdefault("viewport", {"width": 1280, "height": 800})
        ctx = await browser.new_context(**context)
        contexts.append(ctx)
        page = await ctx.new_page()
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        dialogs: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
        failed: list[str] = []
        page.on(
            "response",
            lambda r: (
                failed.append(f"{r.request.method} {r.url} {r.status}") if r.status >= 400 else None
            ),
        )
        page.on("requestfailed", lambda r: failed.append(f"{r.method} {r.url} {r.failure}"))

        async def on_dialog(dialog: Any) -> None:
            dialogs.append(f"{dialog.type}: {dialog.message}")
            # Confirmations are the GUI's own (delete, terminate); anything else is an attack.
            if dialog.type == "confirm":
                await dialog.accept()
            else:
                await dialog.dismiss()

        page.on("dialog", on_dialog)
        base = str(api.raw.make_url("/")).rstrip("/")
        gui = Gui(page, api, base, errors, dialogs, failed)
        guis.append(gui)
        if sign_in:
            await gui.sign_in()
        return gui

    yield make
    if request.node.stash.get(CALL_FAILED, False):
        for gui in guis:
            with contextlib.suppress(Exception):  # the page may be gone; the failure stands
                print(await describe_page(gui))
    for ctx in contexts:
        await ctx.close()


def board_json(gui: Gui) -> Awaitable[Any]:
    return gui.page.evaluate(
        "() => JSON.stringify([...document.querySelectorAll('.card')]"
        ".map(c => [c.dataset.issue, c.closest('.column').dataset.state]))"
    )


def cards(raw: str) -> dict[str, str]:
    return {issue: state for issue, state in json.loads(raw)}
