"""The test process's shared Chromium (tests/browser/shared_chromium.py): it runs as
Playwright's own launch would run it, and one that died is reported, then replaced."""

from __future__ import annotations

import os
import signal

import psutil

from tests.browser.conftest import CHROMIUM_ARGS, chromium_path
from tests.browser.shared_chromium import ChromiumGone, SharedChromium
from tests.fakes.lifecycle import wait_for
from tests.fakes.patience import PATIENCE_SECONDS

# Where each Chromium keeps its profile and how its DevTools are reached: not the same.
PER_PROCESS = ("--user-data-dir=", "--remote-debugging-")


def command_line(process: psutil.Process) -> list[str]:
    """A child's command line; none for one that ended (a zombie the tests before this one
    left unreaped in this process, or one gone meanwhile)."""
    try:
        return list(process.cmdline())
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return []


def browsers_launched_by_playwright() -> set[int]:
    """This process's descendants that are a Chromium browser process Playwright launched
    (its pipe switch; not its renderers and helpers, which carry a `--type=`)."""
    return {
        child.pid
        for child in psutil.Process().children(recursive=True)
        if "--remote-debugging-pipe" in (line := command_line(child))
        and not any(a.startswith("--type=") for a in line)
    }


def switches(pid: int) -> set[str]:
    """The command line of a running Chromium (after /usr/bin/chromium's own additions);
    empty for one that ended meanwhile."""
    try:
        line = command_line(psutil.Process(pid))
    except psutil.NoSuchProcess:
        line = []
    return {a for a in line[1:] if not a.startswith(PER_PROCESS)}


async def test_the_shared_chromium_runs_with_the_switches_of_playwrights_launch(
    shared_chromium: SharedChromium,
) -> None:
    from playwright.async_api import async_playwright

    shared_chromium.address()
    assert shared_chromium.pid is not None
    async with async_playwright() as playwright:
        before = browsers_launched_by_playwright()
        launched = await playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_ARGS
        )
        try:
            # Those started since this launch began: its own, and under load now and then
            # another test's browser of this process (twice in a loaded run). Each Playwright
            # launch uses the same switches, so the shared one must match one of them.
            new = browsers_launched_by_playwright() - before
            assert new, "the launch started no Chromium among this process's descendants"
            shared = switches(shared_chromium.pid)
            assert shared in [switches(pid) for pid in new], (shared, new)
        finally:
            await launched.close()


async def test_a_chromium_that_died_is_reported_then_replaced() -> None:
    chromium = SharedChromium(chromium_path(), CHROMIUM_ARGS)
    try:
        first = chromium.address()
        assert chromium.pid is not None
        os.kill(chromium.pid, signal.SIGKILL)

        def death_report() -> str | None:
            try:
                chromium.check_alive()
            except ChromiumGone as report:
                return str(report)
            return None

        # Until its last thread is gone a killed process cannot be waited for: poll.
        report = await wait_for(death_report, within=PATIENCE_SECONDS)
        assert "was killed by SIGKILL; the end of its log" in report
        assert chromium.address() != first
        chromium.check_alive()
    finally:
        chromium.stop()
