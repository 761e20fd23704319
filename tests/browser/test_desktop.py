"""`steelframe desktop` under Xvfb: it starts a dev service (none answers at the URL),
opens Chromium in --app mode with its own profile, signed in; a screenshot of the X display
shows the window; SIGTERM stops the window and the dev service."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import WAIT_MS, chromium_path
from tests.browser.shared_chromium import read_devtools_active_port
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.ports import refused_port


@pytest.fixture
def xvfb() -> Iterator[str]:
    """A virtual X display, ":N"."""
    binary = shutil.which("Xvfb")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("Xvfb must be installed in CI (apt-get install xvfb)")
        pytest.skip("desktop test did not run: no Xvfb (apt-get install xvfb)")
    read, write = os.pipe()
    process = subprocess.Popen(
        [binary, "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
        pass_fds=(write,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    with os.fdopen(read) as displayfd:
        number = displayfd.readline().strip()
    try:
        yield f":{number}"
    finally:
        process.terminate()
        process.wait(PATIENCE_SECONDS)


@pytest.fixture
def desktop(xvfb: str, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """`steelframe desktop` on the virtual display (a dev service: nothing answers at the
    URL), with Chromium's debugging port open so the test can look inside the window: port
    0, a free one Chromium picks and writes into the profile's DevToolsActivePort."""
    browser = chromium_path()
    profile = tmp_path / "profile"
    env = {**os.environ, "DISPLAY": xvfb, "STEELFRAME_URL": f"http://127.0.0.1:{refused_port()}"}
    env.pop("STEELFRAME_REDIS_URL", None)
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "steelframe.cli", "desktop"),
            *("--browser", browser, "--profile", str(profile)),
            "--browser-arg=--no-sandbox",
            "--browser-arg=--disable-gpu",
            "--browser-arg=--remote-debugging-port=0",
            "--browser-arg=--window-size=1200,760",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process, profile
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_desktop_opens_a_signed_in_window(
    xvfb: str, tmp_path: Path, desktop: tuple[subprocess.Popen[str], Path]
) -> None:
    from PIL import ImageGrab
    from playwright.async_api import async_playwright

    process, profile = desktop
    async with async_playwright() as playwright:
        cdp = await connect(playwright, await devtools_port(profile, process))
        page = await find_app_page(cdp)
        # A one-time code in the link, never the token: the window asks, then signs in.
        await page.wait_for_selector("#link-form:not([hidden])", timeout=WAIT_MS)
        assert "code=" not in page.url  # dropped from the address at once
        await page.click("#link-confirm")
        await page.wait_for_selector("#app:not([hidden])", timeout=WAIT_MS)
        assert await page.inner_text("#operator-name") == "dev"
        await page.wait_for_selector("body[data-ready=true]")
        shot = await asyncio.to_thread(ImageGrab.grab, xdisplay=xvfb)
        await cdp.close()
    await asyncio.to_thread(shot.save, tmp_path / "desktop.png")
    folder = os.environ.get("STEELFRAME_TEST_SCREENSHOTS")
    if folder:
        await asyncio.to_thread(shot.save, Path(folder) / "desktop.png")
    colours = shot.convert("RGB").getcolors(maxcolors=1_000_000) or []
    assert len(colours) > 20, "the X display shows no window"
    # SIGTERM closes the window and stops the dev service it started.
    process.send_signal(signal.SIGTERM)
    output, _ = await asyncio.to_thread(process.communicate, timeout=60)
    assert "starting `steelframe dev`" in output and "token: " in output
    assert "steelframe dev: shutting down" in output


async def devtools_port(profile: Path, process: subprocess.Popen[str]) -> int:
    """The debugging port Chromium took, from the DevToolsActivePort file it writes into its
    profile once it listens."""
    deadline = time.monotonic() + PATIENCE_SECONDS  # a Chromium start on a loaded machine
    while True:
        address = read_devtools_active_port(profile)
        if address is not None:
            return address.port
        if process.poll() is not None:
            raise AssertionError(f"steelframe desktop exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError("Chromium never said where its debugging port listens")
        await asyncio.sleep(0.2)


async def connect(playwright: object, port: int) -> object:
    deadline = time.monotonic() + WAIT_MS / 1000 * 4
    while True:
        try:
            return await playwright.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")  # type: ignore[attr-defined]
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def find_app_page(cdp: object) -> object:
    deadline = time.monotonic() + PATIENCE_SECONDS  # a Chromium start on a loaded machine
    while True:
        for context in cdp.contexts:  # type: ignore[attr-defined]
            for page in context.pages:
                if page.url.startswith("http://127.0.0.1"):
                    return page
        if time.monotonic() > deadline:
            raise AssertionError("the app window never opened the GUI")
        await asyncio.sleep(0.2)
