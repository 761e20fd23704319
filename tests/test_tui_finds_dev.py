"""`make run` in one terminal, `make tui` in another: `steelframe tui` (and `desktop`) given
no token use the `steelframe dev` running on the checkout's data folder, the URL it names in
its lock and the token it keeps; a token given always wins, and a dev that ended (its lock
file and token file left behind, held by no one) is never used."""

from __future__ import annotations

import argparse
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from steelframe.commands.desktop import service, target
from steelframe.commands.tui import checkout_dev_folders, with_running_dev
from steelframe.dev import hold_data_dir, record_url
from steelframe.dev_settings import RunningDev, held_by
from tests.fakes.dev_process import (
    CONFIG_VARS,
    dev_up_to_its_token,
    production_shell,
    steelframe_cli,
    unconfigured_shell,
)
from tui_client.__main__ import UsageError, resolve


def _args(**values: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"url": None, "token": None, **values})


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
