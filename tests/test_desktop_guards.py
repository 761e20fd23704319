"""`steelframe desktop` as root and in a shell configured for production: one line saying
what to do as root (before anything starts), and a dev service on its own database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from steelframe.cli import main
from tests.test_dev_demo_loop import CONFIG_VARS


def test_as_root_it_says_in_one_line_how_to_run_the_window(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("DISPLAY", ":0")  # a screen to open the window on
    profile = tmp_path / "profile"
    argv = ["desktop", "--browser", "/bin/true", "--profile", str(profile), "--no-dev"]
    assert main([*argv, "--url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "as a normal user" in err[0]
    assert "--browser-arg=--no-sandbox" in err[0]
    assert not profile.exists()  # nothing was started
    # Passing the flag is the operator's choice: then it goes on (here: no service answers).
    assert main([*argv, "--url", "http://127.0.0.1:9", "--browser-arg=--no-sandbox"]) == 2
    assert "no service answers" in capsys.readouterr().err


def test_in_a_production_shell_the_dev_it_starts_keeps_its_own_database(tmp_path: Path) -> None:
    production_db = tmp_path / "production.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(CONFIG_VARS)}
    env.update(
        STEELFRAME_DATABASE_URL=f"sqlite:///{production_db}",
        STEELFRAME_DATA_DIR=str(tmp_path / "production-data"),
        STEELFRAME_URL="http://127.0.0.1:9",  # nothing answers: desktop starts dev
        DISPLAY=":0",  # a screen, for the window that /bin/true stands for
    )
    # The window closes at once (a browser that exits), so desktop stops dev again.
    result = subprocess.run(
        [
            *(sys.executable, "-m", "steelframe.cli", "desktop", "--browser", "/bin/true"),
            *("--profile", str(tmp_path / "profile"), "--browser-arg=--no-sandbox"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    said = result.stdout
    assert "not using STEELFRAME_DATA_DIR, STEELFRAME_DATABASE_URL" in said, said
    assert f"database: sqlite:///{tmp_path / 'var' / 'steelframe.db'}" in said
    assert not production_db.exists() and not (tmp_path / "production-data").exists()


def test_without_a_display_it_says_what_works_instead_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Over ssh: Chromium printed "Missing X server or $DISPLAY" and the command ended with
    no word of its own (exit 1)."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    profile = tmp_path / "profile"
    argv = ["desktop", "--browser", "/bin/true", "--profile", str(profile)]
    argv += ["--browser-arg=--no-sandbox", "--url", "http://127.0.0.1:9"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "steelframe desktop: no display to open a window on (DISPLAY and WAYLAND_DISPLAY are "
        "unset, as over ssh): open http://127.0.0.1:9 in a browser where you have a screen, or "
        "use the terminal client: make tui URL=http://127.0.0.1:9 (steelframe tui --url "
        "http://127.0.0.1:9)\n"
    )
    assert not profile.exists()  # nothing was started
    monkeypatch.setenv("DISPLAY", ":0")  # with one, it goes on (here: no service answers)
    assert main([*argv, "--no-dev"]) == 2
    assert "no service answers" in capsys.readouterr().err
