"""`make run` in one terminal, `make tui` in another: `steelframe tui` (and `desktop`) given
no token use the `steelframe dev` running on the checkout's data folder, the URL it names in
its lock and the token it keeps; a token given always wins, and a dev that ended (its lock
file and token file left behind, held by no one) is never used. A dev on a `--data-dir` of
its own is found by `--data-dir` (only there), and dev's banner names it when it must."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from steelframe.cli import build_parser
from steelframe.commands.desktop import DesktopError, service, target
from steelframe.commands.tui import checkout_dev_folders, with_running_dev
from steelframe.dev import _next_steps, hold_data_dir, record_url, runnable
from steelframe.dev_settings import RunningDev, dev_folders, held_by, plan_dev
from tests.fakes.dev_process import (
    CONFIG_VARS,
    dev_up_to_its_token,
    lines_through,
    production_shell,
    steelframe_cli,
    unconfigured_shell,
)
from tests.fakes.patience import PATIENCE_SECONDS
from tui_client.__main__ import UsageError, resolve


def _args(**values: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"url": None, "token": None, "data_dir": None, **values})


def _said(dev_said: list[str], key: str) -> str:
    [line] = [line for line in dev_said if line.startswith(f"{key}: ")]
    return line.removeprefix(f"{key}: ").strip()


def _board(url: str, token: str) -> int:
    request = urllib.request.Request(
        f"{url}/api/operator/board", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's checkout: its directory, with no STEELFRAME_* of the test's shell."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(CONFIG_VARS):
            monkeypatch.delenv(name)
    return tmp_path


def test_tui_uses_the_url_and_token_of_the_dev_running_here(checkout: Path, redis_url: str) -> None:
    folder = checkout / "var"
    with dev_up_to_its_token(checkout, production_shell(checkout, redis_url)) as dev:
        url, token = _said(dev.said, "url"), _said(dev.said, "token")
        # The lock names dev's pid, then the URL it is bound to (a free port: --port 0).
        assert (folder / "dev.lock").read_text() == f"{dev.pid}\n{url}\n"

        args, note = with_running_dev(_args(), {}, checkout_dev_folders)
        assert resolve(args, {}) == (url, token)
        assert note == f"using the steelframe dev running on {folder} (pid {dev.pid}) at {url}"
        assert _board(*resolve(args, {})) == 200
        # `steelframe desktop` opens the same dev, signed in by a one-time code.
        assert target(None) == (url, token)
        with service(url, allow_dev=False, token=token) as page:
            assert page.startswith(f"{url}/#code=") and token not in page

        # A URL given without a token: the dev's at that URL gives its token, and says so.
        args, note = with_running_dev(_args(), {"STEELFRAME_URL": url + "/"}, lambda: [folder])
        assert resolve(args, {}) == (url, token)
        assert note.startswith("using the token of the steelframe dev running on ")
        other = "http://127.0.0.1:9"
        with pytest.raises(UsageError) as refused:
            with_running_dev(_args(url=other), {}, lambda: [folder])
        assert str(refused.value) == (
            f"no operator token for {other}: pass --token or set STEELFRAME_TOKEN (the "
            f"steelframe dev running on {folder} (pid {dev.pid}) is at {url})"
        )

        # A token given wins, the flag's or the environment's, with its URL or the default;
        # the folders are not even looked for.
        def never() -> list[Path]:
            raise AssertionError("looked for a dev though a token was given")

        given = _args(url="http://svc:9000", token="sfo_flag")
        assert with_running_dev(given, {}, never) == (given, "")
        env = {"STEELFRAME_TOKEN": "sfo_env"}
        args, note = with_running_dev(_args(), env, never)
        assert (resolve(args, env), note) == (("http://127.0.0.1:8080", "sfo_env"), "")


def test_a_dev_that_ended_is_not_used_though_its_files_remain(checkout: Path) -> None:
    folder = checkout / "var"
    folder.mkdir()
    # What a dev leaves behind when it ends: its lock file (no one holds it) and its token.
    (folder / "dev.lock").write_text("4242\nhttp://127.0.0.1:8765\n")
    (folder / "dev-token").write_text("sfd_stale\n")
    with pytest.raises(UsageError) as refused:
        with_running_dev(_args(), {}, checkout_dev_folders)
    assert str(refused.value).startswith(
        f"no operator token, and no steelframe dev runs on {folder}: start one with `make run` "
    )
    assert target(None) == ("http://127.0.0.1:8080", None)


def test_a_url_line_still_being_written_is_not_read_as_the_url(tmp_path: Path) -> None:
    assert held_by(tmp_path, "4242\nhttp://127.0.0.1:87") == RunningDev(tmp_path, "4242", None)
    assert held_by(tmp_path, "4242\nhttp://127.0.0.1:8765\n").url == "http://127.0.0.1:8765"
    assert held_by(tmp_path, "") == RunningDev(tmp_path, "?", None)


def test_a_dev_still_starting_is_waited_for_not_guessed(checkout: Path) -> None:
    folder = checkout / "var"
    lock = hold_data_dir(folder)  # this process plays a dev not yet bound
    assert lock is not None
    with lock:
        (folder / "dev-token").write_text("sfd_previous\n")  # a former run's, maybe stale
        with pytest.raises(UsageError) as refused:
            with_running_dev(_args(), {}, checkout_dev_folders)
        assert f"running on {folder} (pid {os.getpid()}) is still starting" in str(refused.value)
        assert target(None) == ("http://127.0.0.1:8080", None)

        # Bound, its token kept: the TUI and the desktop window use both.
        (folder / "dev-token").write_text("sfd_current\n")
        record_url(lock, "http://127.0.0.1:8765")
        args, _ = with_running_dev(_args(), {}, checkout_dev_folders)
        assert resolve(args, {}) == ("http://127.0.0.1:8765", "sfd_current")
        assert target(None) == ("http://127.0.0.1:8765", "sfd_current")
        assert target("http://127.0.0.1:9") == ("http://127.0.0.1:9", None)  # given: wins


def test_steelframe_tui_with_no_token_and_no_dev_says_make_run(tmp_path: Path) -> None:
    result = steelframe_cli(tmp_path, unconfigured_shell(), "tui")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"steelframe tui: no operator token, and no steelframe dev runs on {tmp_path / 'var'}: "
        "start one with `make run` (steelframe dev) in another terminal and this finds it, or "
        "pass --token or set STEELFRAME_TOKEN (`steelframe operator create NAME` makes one for "
        "a serve)\n"
    )
    assert list(tmp_path.iterdir()) == []  # looking made nothing


def _never() -> list[Path]:
    raise AssertionError("searched this directory's data folders though --data-dir was given")


def _banner(configured: Settings, **dev_options: Any) -> list[str]:
    """The banner of a dev started with `dev_options` in a shell `configured` so."""
    dev = plan_dev(
        configured, **{"data_dir": None, "use_configured_services": False, **dev_options}
    )
    steps = _next_steps(
        "http://127.0.0.1:8765",
        "sfd_secret",
        dev.settings,
        None,
        clients_search=dev_folders(configured),
    )
    return steps.splitlines()


def _printed(banner: list[str], prefix: str) -> str:
    [line] = [line for line in banner if line.startswith(prefix)]
    return line.removeprefix(prefix)


def _chat_command(banner: list[str]) -> str:
    """The command the banner gives to open Chat: the line after its "Try it" line."""
    return banner[banner.index("Try it: open Chat in another terminal") + 1]


def test_the_banner_of_a_dev_the_clients_find_names_neither_token_nor_folder(
    checkout: Path,
) -> None:
    steelframe = runnable("steelframe")
    production = Settings.from_env({"STEELFRAME_DATA_DIR": str(checkout / "production-data")})
    for banner in (
        _banner(Settings.from_env({})),  # `make run`: dev's own ./var
        _banner(production),  # dev's own ./var, though the shell names another folder
        _banner(production, use_configured_services=True),  # the configured folder
    ):
        assert _chat_command(banner) == f"  {steelframe} tui", banner
        assert _printed(banner, "The web GUI in its own window: ") == f"{steelframe} desktop"
        tui_and_desktop = [line for line in banner if "curl" not in line]
        assert not any("sfd_secret" in line for line in tui_and_desktop), banner
        assert not any("--data-dir" in line or "--url" in line for line in banner), banner
        # The curl line still needs the token; the Board line too.
        assert any("Bearer sfd_secret" in line for line in banner if "api/operator/chat" in line)
        assert _printed(banner, "Board: ").startswith("curl -s -H 'Authorization: Bearer sfd_")


def test_the_banner_of_a_dev_on_a_data_dir_of_its_own_names_that_folder(checkout: Path) -> None:
    steelframe = runnable("steelframe")
    folder = checkout / "my data"
    banner = _banner(Settings.from_env({}), data_dir=Path("my data"))
    assert _chat_command(banner) == f"  {steelframe} tui --data-dir '{folder}'", banner
    assert _printed(banner, "The web GUI in its own window: ") == (
        f"{steelframe} desktop --data-dir '{folder}'"
    )
    assert not any("STEELFRAME_TOKEN" in line or "steelframe-tui" in line for line in banner)


def test_a_data_dir_is_searched_alone_and_says_why_when_no_dev_runs_there(checkout: Path) -> None:
    folder = checkout / "elsewhere"
    lock = hold_data_dir(checkout / "var")  # a dev in the default folder: not the one asked for
    assert lock is not None
    with lock:
        (checkout / "var" / "dev-token").write_text("sfd_default\n")
        record_url(lock, "http://127.0.0.1:8765")
        with pytest.raises(UsageError) as refused:
            with_running_dev(_args(data_dir=Path("elsewhere")), {}, _never)
        assert str(refused.value) == (
            f"no operator token, and no steelframe dev runs on {folder}: start one with "
            f"`steelframe dev --data-dir {folder}` in another terminal and this finds it, or "
            "pass --token or set STEELFRAME_TOKEN (`steelframe operator create NAME` makes one "
            "for a serve)"
        )
        with pytest.raises(DesktopError) as no_window:
            target(None, Path("elsewhere"))
        assert str(no_window.value) == (
            f"no steelframe dev runs on {folder}: start one there with "
            f"`steelframe dev --data-dir {folder}`, or leave out --data-dir"
        )
        # A token given still wins over --data-dir; the folder is not even looked in.
        given = _args(token="sfo_flag", data_dir=Path("elsewhere"))
        assert with_running_dev(given, {}, _never) == (given, "")


def test_desktop_on_a_data_dir_waits_for_its_dev_and_keeps_to_its_url(checkout: Path) -> None:
    folder = checkout / "elsewhere"
    lock = hold_data_dir(folder)  # this process plays a dev on --data-dir elsewhere
    assert lock is not None
    with lock:
        with pytest.raises(DesktopError, match=r"\(pid \d+\) is still starting; try again"):
            target(None, folder)
        (folder / "dev-token").write_text("sfd_elsewhere\n")
        record_url(lock, "http://127.0.0.1:8765")
        assert target(None, folder) == ("http://127.0.0.1:8765", "sfd_elsewhere")
        assert target("http://127.0.0.1:8765/", folder) == (
            "http://127.0.0.1:8765",
            "sfd_elsewhere",
        )
        with pytest.raises(DesktopError, match=r"is at http://127.0.0.1:8765, not http://x:9$"):
            target("http://x:9", folder)
        assert target(None) == ("http://127.0.0.1:8080", None)  # not this checkout's folder


def test_steelframe_tui_with_a_data_dir_and_no_dev_there_says_how_to_start_one(
    tmp_path: Path,
) -> None:
    result = steelframe_cli(tmp_path, unconfigured_shell(), "tui", "--data-dir", "elsewhere")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(
        f"steelframe tui: no operator token, and no steelframe dev runs on {tmp_path / 'elsewhere'}"
        f": start one with `steelframe dev --data-dir {tmp_path / 'elsewhere'}` in another "
    )
    assert list(tmp_path.iterdir()) == []  # looking made nothing


def test_the_commands_a_dev_on_a_data_dir_prints_find_it_and_only_they(checkout: Path) -> None:
    folder = checkout / "elsewhere"
    dev = subprocess.Popen(
        [sys.executable, "-m", "steelframe.cli", "dev", "--port", "0", "--data-dir", "elsewhere"],
        cwd=checkout,
        env=unconfigured_shell(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        banner = [line.rstrip("\n") for line in lines_through(dev, "Board: ")]
        url, token = _said(banner, "url"), _said(banner, "token")
        tui = shlex.split(_chat_command(banner))
        desktop = shlex.split(_printed(banner, "The web GUI in its own window: "))
        assert tui[1:] == ["tui", "--data-dir", str(folder)], banner
        assert desktop[1:] == ["desktop", "--data-dir", str(folder)], banner

        # The commands as printed find it: no token, no URL pasted.
        printed_tui = build_parser(tui[1:]).parse_args(tui[1:])
        args, note = with_running_dev(printed_tui, {}, _never)
        assert resolve(args, {}) == (url, token)
        assert note == f"using the steelframe dev running on {folder} (pid {dev.pid}) at {url}"
        assert _board(*resolve(args, {})) == 200
        printed_desktop = build_parser(desktop[1:]).parse_args(desktop[1:])
        assert target(printed_desktop.url, printed_desktop.data_dir) == (url, token)

        # Without --data-dir, this directory's folders (./var) are searched: not found there.
        with pytest.raises(UsageError, match=f"no steelframe dev runs on {checkout / 'var'}:"):
            with_running_dev(_args(), {}, checkout_dev_folders)
        assert target(None) == ("http://127.0.0.1:8080", None)
    finally:
        dev.terminate()
        dev.wait(timeout=PATIENCE_SECONDS)
