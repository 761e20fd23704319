"""`make desktop` passes flags on to `steelframe desktop` (ARGS, as `make bench ARGS=`): as
root Chromium starts only with `--browser-arg=--no-sandbox`, which make once had no way to
pass, and the root refusal names the make form too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from steelframe.cli import main
from tests.fakes.make_plan import planned_command


def test_make_desktop_passes_args_on_to_the_command() -> None:
    line = planned_command(
        "desktop", "URL=http://127.0.0.1:9", "ARGS=--browser-arg=--no-sandbox --no-dev"
    )
    assert line.endswith(
        "steelframe desktop --url http://127.0.0.1:9 --browser-arg=--no-sandbox --no-dev"
    ), line
    assert planned_command("desktop").endswith("steelframe desktop"), planned_command("desktop")


def test_as_root_the_refusal_names_the_make_form_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    argv = ["desktop", "--browser", "/bin/true", "--profile", str(tmp_path / "p"), "--no-dev"]
    assert main([*argv, "--url", "http://127.0.0.1:9"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "make desktop ARGS=--browser-arg=--no-sandbox" in line, line
