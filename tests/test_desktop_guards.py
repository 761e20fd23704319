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
