"""`steelframe desktop`: the web GUI in its own application window.

The installed Chromium (or Chrome) in `--app` mode, with a profile of its own so its sign-in
cookie and window stay apart from the operator's everyday browser. pywebview would need GTK
or Qt bindings that do not install cleanly from the registries, and a browser is already
what the GUI is tested in. Against a running service (--url, STEELFRAME_URL, else the
`steelframe dev` running on this checkout's data folder, signed in with its kept token, else
the dev default), or, when none answers, a `steelframe dev` it starts and stops again. Given
--data-dir DIR, only the dev running on DIR, signed in with its token, or a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from steelframe.cli import load_settings
from steelframe.dev_settings import (
    TOKEN_FILE,
    dev_client,
    dev_folders,
    own_data_folder,
    running_dev,
)

DEFAULT_URL = "http://127.0.0.1:8080"
# A client's variables (shared with the TUI); the service refuses unknown STEELFRAME_* names.
CLIENT_ENV = ("STEELFRAME_URL", "STEELFRAME_TOKEN")
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
DEV_START_SECONDS = 180.0
STOP_SECONDS = 15.0
# The dev service stopping lets a watched chat turn finish (STEELFRAME_SHUTDOWN_GRACE_SECONDS,
# 15 s), then ends it with its frame and a note in its session (up to 15 s more): killed
# sooner, the turn would end with nothing saying so.
DEV_STOP_SECONDS = 35.0


class DesktopError(Exception):
    """Something the operator can fix, said in words (exit status 2)."""


def register(subparsers: Any) -> None:
    desktop = subparsers.add_parser("desktop")
    desktop.add_argument(
        "--url",
        help="a running service (default STEELFRAME_URL, else the steelframe dev running "
        f"on the data folder, else {DEFAULT_URL})",
    )
    desktop.add_argument(
        "--data-dir",
        type=Path,
        help="open the steelframe dev running on this folder only (`steelframe dev --data-dir "
        "DIR`'s), signed in with its token (at --url, when given)",
    )
    desktop.add_argument("--browser", help="Chromium or Chrome executable (default: found on PATH)")
    desktop.add_argument(
        "--profile",
        type=Path,
        help="the window's own browser profile (default ~/.local/share/steelframe/desktop)",
    )
    desktop.add_argument(
        "--no-dev", action="store_true", help="never start a dev service when none answers"
    )
    desktop.add_argument(
        "--browser-arg",
        action="append",
        default=[],
        help="an extra browser flag (repeatable), e.g. --browser-arg=--no-sandbox",
    )
    desktop.set_defaults(handler=cmd_desktop)


def cmd_desktop(args: argparse.Namespace) -> int:
    try:
        browser = find_browser(args.browser)
        check_root(args.browser_arg)
        url, token = target(args.url or os.environ.get("STEELFRAME_URL"), args.data_dir)
        check_display(args.browser_arg, os.environ, url)
        profile = args.profile or Path.home() / ".local/share/steelframe/desktop"
        with (
            _terminate_on_sigterm(),
            service(url.rstrip("/"), allow_dev=not args.no_dev, token=token) as page,
        ):
            return run_window(browser, page, profile, args.browser_arg)
    except DesktopError as exc:
        print(f"steelframe desktop: {exc}", file=sys.stderr)
        return 2


def target(given: str | None, data_dir: Path | None = None) -> tuple[str, str | None]:
    """The service's URL, and the token to sign in with when it is a running dev's: the dev
    running on `data_dir` when given (at the URL given, if one is), else the URL given, else
    the dev running on this checkout's data folder (`make run` on any PORT), else
    DEFAULT_URL."""
    if data_dir is not None:
        folder = own_data_folder(data_dir)
        dev = dev_client([folder], url=given)
        if dev is None:
            raise DesktopError(_no_dev_on(folder, given))
    elif given:
        return given, None
    else:
        dev = dev_client(dev_folders(load_settings()))
        if dev is None:
            return DEFAULT_URL, None
    print(
        f"steelframe desktop: using the steelframe dev running on {dev.dev.folder} "
        f"(pid {dev.dev.pid}) at {dev.url}",
        file=sys.stderr,
    )
    return dev.url, dev.token


def _no_dev_on(folder: Path, url: str | None) -> str:
    """Why --data-dir found no dev to open: a folder asked for by name is never swapped
    for another service, nor for a dev started for the window on another folder."""
    dev = running_dev(folder)
    if dev is None:
        return (
            f"no steelframe dev runs on {folder}: start one there with "
            f"`steelframe dev --data-dir {shlex.quote(str(folder))}`, or leave out --data-dir"
        )
    if dev.url is None:
        return (
            f"the steelframe dev running on {folder} (pid {dev.pid}) is still starting; "
            "try again once it prints its token"
        )
    running = f"the steelframe dev running on {folder} (pid {dev.pid})"
    if url is not None and dev.url != url.rstrip("/"):
        return f"{running} is at {dev.url}, not {url}"
    return f"{running} keeps no token in {folder / TOKEN_FILE}"


def find_browser(explicit: str | None) -> str:
    candidates = [explicit] if explicit else [shutil.which(name) for name in BROWSERS]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    raise DesktopError(
        "no Chromium or Chrome found: install one (apt-get install chromium) or pass --browser"
    )


def check_display(extra: list[str], environ: Mapping[str, str], url: str) -> None:
    """A window on Linux needs an X or Wayland display. Over ssh or in a container there is
    none: Chromium printed its own errors ("Missing X server or $DISPLAY") and the command
    ended with no word of its own. Said before anything starts, with what works instead."""
    if (
        not sys.platform.startswith("linux")
        or environ.get("DISPLAY")
        or environ.get("WAYLAND_DISPLAY")
    ):
        return
    if any(arg.startswith(("--headless", "--ozone-platform")) for arg in extra):
        return  # the operator chose a browser that needs no display
    raise DesktopError(
        "no display to open a window on (DISPLAY and WAYLAND_DISPLAY are unset, as over ssh): "
        f"open {url} in a browser where you have a screen, or use the terminal client: "
        f"make tui URL={url} (steelframe tui --url {url})"
    )


def check_root(extra: list[str]) -> None:
    """Chromium refuses to start as root without --no-sandbox, and says so only in its own
    log line. Turning its sandbox off is the operator's call (the window can follow links
    to any site), so as root the command says, before starting anything, how to choose."""
    if os.geteuid() != 0 or "--no-sandbox" in extra:
        return
    raise DesktopError(
        "Chromium does not run as root with its sandbox: run `steelframe desktop` as a normal "
        "user, or accept a browser without it: steelframe desktop --browser-arg=--no-sandbox "
        "(make desktop ARGS=--browser-arg=--no-sandbox)"
    )


def healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=timeout) as response:
            return response.status == 200 and "status" in json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False


@contextmanager
def service(url: str, *, allow_dev: bool, token: str | None = None) -> Iterator[str]:
    """The page to open: the running service's (signed in when its `token` is known: a
    running dev's), or a dev service's started for the window (signed in by a one-time code
    in the URL fragment: never the token, docs/gui.md)."""
    if healthy(url):
        yield f"{url}/#code={sign_in_code(url, token)}" if token else f"{url}/"
        return
    if not allow_dev:
        raise DesktopError(f"no service answers at {url}: start `steelframe serve` or pass --url")
    print(f"steelframe desktop: nothing answers at {url}; starting `steelframe dev`", flush=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "steelframe.cli", "dev", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in CLIENT_ENV},
        start_new_session=True,  # Ctrl-C in this terminal reaches the dev service via us
    )
    try:
        dev_url, token = _read_dev_banner(process)
        yield f"{dev_url}/#code={sign_in_code(dev_url, token)}"
    finally:
        _stop(process, within=DEV_STOP_SECONDS)


def sign_in_code(url: str, token: str) -> str:
    """A one-time sign-in code for a link (`POST /api/operator/sign-in-codes`)."""
    request = urllib.request.Request(
        f"{url}/api/operator/sign-in-codes",
        data=b"{}",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(json.loads(response.read())["code"])


def _read_dev_banner(process: subprocess.Popen[str]) -> tuple[str, str]:
    assert process.stdout is not None
    url = token = None
    deadline = time.monotonic() + DEV_START_SECONDS
    for line in process.stdout:
        print(line, end="", flush=True)
        if line.startswith("url: "):
            url = line[5:].strip()
        elif line.startswith("token: "):
            token = line[7:].strip()
        if url and token:
            # Keep echoing what dev prints, so its pipe never fills and blocks it.
            threading.Thread(target=_echo, args=(process.stdout,), daemon=True).start()
            return url, token
        if time.monotonic() > deadline:
            break
    raise DesktopError("`steelframe dev` did not start: see its output above")


def _echo(stream: Any) -> None:
    for line in stream:
        print(line, end="", flush=True)


def run_window(browser: str, page: str, profile: Path, extra: list[str]) -> int:
    profile.mkdir(parents=True, exist_ok=True)
    command = [
        browser,
        f"--app={page}",
        f"--user-data-dir={profile}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-sync",
        "--disable-background-networking",
        "--disable-component-update",
        *extra,
    ]
    window = subprocess.Popen(command)
    try:
        return window.wait()
    finally:
        _stop(window)


def _stop(process: subprocess.Popen[Any], *, within: float = STOP_SECONDS) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(within)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def _terminate_on_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the window and the dev service are stopped too."""

    def raise_interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
