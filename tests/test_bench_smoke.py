"""A quick smoke run of each benchmark: they must keep working, whatever the figures."""

from __future__ import annotations

import pytest

from bench import chat_overhead, cli_startup


def test_chat_overhead_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    chat_overhead.main(["--smoke"])
    out = capsys.readouterr().out
    assert "request -> first status" in out and "blocking rps" in out and "ratio" in out


def test_cli_startup_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    cli_startup.main(["--smoke"])
    out = capsys.readouterr().out
    assert "steelframe --version" in out and "vs baseline" in out
