"""A quick smoke run of each benchmark: they must keep working, whatever the figures."""

from __future__ import annotations

import pytest

from bench import chat_overhead, cli_startup, gui


def test_chat_overhead_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    chat_overhead.main(["--smoke"])
    out = capsys.readouterr().out
    assert "request -> first status" in out and "blocking rps" in out and "ratio" in out


def test_cli_startup_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    cli_startup.main(["--smoke"])
    out = capsys.readouterr().out
    assert "steelframe --version" in out and "vs baseline" in out


def test_gui_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    gui.main(["--smoke"])
    out = capsys.readouterr().out
    if "did not run" in out:
        import os

        assert not os.environ.get("CI"), out
        pytest.skip(out.strip())
    assert "load -> interactive" in out and "first delta -> frame" in out and "ratio" in out
