"""One headless Chromium per test process, which each browser test reaches over the DevTools
protocol (Playwright's `connect_over_cdp`) with a fresh browser context of its own.

Why not Playwright's `launch` per test: a Chromium start and stop costs about as much CPU
as a short browser test, and there are dozens per run. Why not a Playwright launched once
per process: Playwright's async objects belong to the event loop that made them, and every
test (with the service fixtures it uses) runs on its own loop. A process started here belongs
to no loop; each test's own Playwright connects to it.

If Chromium dies (a crash, an out-of-memory kill), the test that was running says so in its
teardown, with the end of Chromium's log, and the next test starts a new one."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.fakes.patience import PATIENCE_SECONDS

# What Playwright's `launch` gives Chromium besides the caller's args (playwright-core's
# `chromiumSwitches`, with the headless ones of its `_innerDefaultArgs`), so a test sees
# the page as it did when each test launched its own: no throttled timers in a page in the
# background, no scrollbars, the sRGB colour profile, no popup blocker...
# tests/browser/test_shared_chromium.py checks the list against the installed Playwright.
PLAYWRIGHT_SWITCHES = (
    "--disable-field-trial-config",
    "--disable-background-networking",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-back-forward-cache",
    "--disable-breakpad",
    "--disable-component-extensions-with-background-pages",
    "--disable-component-update",
    "--no-default-browser-check",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--disable-edgeupdater",
    "--disable-extensions",
    "--disable-features=AvoidUnnecessaryBeforeUnloadCheckSync,DestroyProfileOnBrowserClose,"
    "HttpsUpgrades,HttpsFirstBalancedModeAutoEnable,LensOverlay,MediaRouter,PaintHolding,"
    "ThirdPartyStoragePartitioning,AvoidCorsURLLoaderRestartOnRedirect,"
    "TcpPortRandomizationWin,OptimizationHints,NetworkTimeServiceQuerying,AimEnabled,"
    "PreconnectToSearch,msForceBrowserSignIn,msEdgeUpdateLaunchServicesPreferredVersion",
    "--enable-features=CDPScreenshotNewSurface,SkipListAccountsWithoutGaiaCookies",
    "--allow-pre-commit-input",
    "--disable-hang-monitor",
    "--disable-ipc-flooding-protection",
    "--disable-popup-blocking",
    "--disable-prompt-on-repost",
    "--disable-renderer-backgrounding",
    "--disable-updater-scheduler",
    "--force-color-profile=srgb",
    "--metrics-recording-only",
    "--no-first-run",
    "--password-store=basic",
    "--use-mock-keychain",
    "--no-service-autorun",
    "--disable-search-engine-choice-screen",
    "--unsafely-disable-devtools-self-xss-warnings",
    "--enable-unsafe-swiftshader",
    "--edge-skip-compat-layer-relaunch",
    "--disable-stack-profiler",
    "--disable-infobars",
    "--disable-sync",
    "--do-not-de-elevate",
    "--headless",
    "--hide-scrollbars",
    "--mute-audio",
    "--blink-settings=primaryHoverType=2,availableHoverTypes=2,"
    "primaryPointerType=4,availablePointerTypes=4",
    "--no-startup-window",
)
LOG_TAIL_CHARS = 3000


@dataclass(frozen=True)
class DevToolsAddress:
    """Where a Chromium's DevTools protocol listens, as its DevToolsActivePort file says."""

    port: int
    browser_path: str  # /devtools/browser/<id>

    @property
    def websocket_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}{self.browser_path}"


def read_devtools_active_port(profile: Path) -> DevToolsAddress | None:
    """The address a Chromium started with `--remote-debugging-port=0` (it picks a free
    port) writes into its profile once it listens: the port, then the browser's path. None
    until the file is there and whole."""
    try:
        lines = (profile / "DevToolsActivePort").read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 2 or not lines[0].isdigit() or not lines[1].startswith("/devtools/"):
        return None
    return DevToolsAddress(int(lines[0]), lines[1])


class ChromiumGone(RuntimeError):
    """The shared Chromium exited or stopped answering; the message says how and ends with
    its log."""


@dataclass
class RunningChromium:
    process: subprocess.Popen[bytes]
    folder: Path  # the profile and the log, removed with it
    address: DevToolsAddress

    @property
    def log(self) -> Path:
        return self.folder / "chromium.log"

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        return "(no log)"

    def describe_exit(self) -> str:
        code = self.process.returncode
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited ({code})"
        return f"Chromium (pid {self.process.pid}) {how}; the end of its log:\n{self.log_tail()}"

    def stop(self) -> None:
        """Chromium and every process it started (its own process group, as Playwright
        starts it): its renderers and zygote outlive a browser that crashed."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(PATIENCE_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_chromium(executable: str, args: list[str]) -> RunningChromium:
    """A headless Chromium with a profile of its own in a new temporary folder, once its
    DevTools port listens."""
    folder = Path(tempfile.mkdtemp(prefix="steelframe-chromium-"))
    with open(folder / "chromium.log", "wb") as log:
        process = subprocess.Popen(
            [
                executable,
                *PLAYWRIGHT_SWITCHES,
                *args,
                "--remote-debugging-port=0",
                f"--user-data-dir={folder / 'profile'}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a group to stop whole, out of reach of the terminal's ^C
        )
    deadline = time.monotonic() + PATIENCE_SECONDS  # a Chromium start on a loaded machine
    while (address := read_devtools_active_port(folder / "profile")) is None:
        starting = RunningChromium(process, folder, DevToolsAddress(0, ""))
        if process.poll() is not None:
            message = f"Chromium did not start: {starting.describe_exit()}"
            starting.stop()
            raise ChromiumGone(message)
        if time.monotonic() > deadline:
            starting.stop()
            raise ChromiumGone(
                f"Chromium never said where its DevTools port listens; its log:\n"
                f"{starting.log_tail()}"
            )
        time.sleep(0.05)
    return RunningChromium(process, folder, address)


class SharedChromium:
    """The test process's Chromium: started on first use, started again after it died."""

    def __init__(self, executable: str, args: list[str]) -> None:
        self._executable = executable
        self._args = args
        self._running: RunningChromium | None = None

    def address(self) -> DevToolsAddress:
        """Where the live Chromium listens, starting one if there is none (or it died)."""
        if self._running is not None and self._running.process.poll() is not None:
            self._running.stop()
            self._running = None
        if self._running is None:
            self._running = start_chromium(self._executable, self._args)
        return self._running.address

    @property
    def pid(self) -> int | None:
        return self._running.process.pid if self._running is not None else None

    def check_alive(self) -> None:
        """Raises ChromiumGone if the Chromium a test used died meanwhile."""
        if self._running is not None and self._running.process.poll() is not None:
            raise ChromiumGone(
                f"{self._running.describe_exit()}\n(the next browser test starts a new one)"
            )

    def stop(self) -> None:
        if self._running is not None:
            self._running.stop()
            self._running = None
