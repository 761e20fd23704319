"""`make desktop` passes flags on to `steelframe desktop` (ARGS, as `make bench ARGS=`): as
root Chromium starts only with `--browser-arg=--no-sandbox`, which make once had no way to
pass, and the root refusal names the make form too."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from steelframe.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _planned(*variables: str) -> str:
    command = ["make", "-n", "--no-print-directory", "-o", ".venv/.installed-runtime", "desktop"]
    result = subprocess.run(
        # -o: the venv counts as installed (only the desktop line is planned); no directory
        # lines under a nested `make test`.
        [*command, *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip().splitlines()[-1]


def test_make_desktop_passes_args_on_to_the_command() -> None:
    line = _planned("URL=http://127.0.0.1:9", "ARGS=--browser-arg=--no-sandbox --no-dev")
    assert line.endswith(
        "steelframe desktop --url http://127.0.0.1:9 --browser-arg=--no-sandbox --no-dev"
    ), line
    assert _planned().endswith("steelframe desktop"), _planned()


def test_as_root_the_refusal_names_the_make_form_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    argv = ["desktop", "--browser", "/bin/true", "--profile", str(tmp_path / "p"), "--no-dev"]
    assert main([*argv, "--url", "http://127.0.0.1:9"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "make desktop ARGS=--browser-arg=--no-sandbox" in line, line
