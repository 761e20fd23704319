"""A smoke run of the runtime overhead benchmark: it must keep working, whatever the figures."""

from __future__ import annotations

import pytest

from bench import runtime_overhead


def test_runtime_overhead_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    runtime_overhead.main(["--smoke"])
    out = capsys.readouterr().out
    for words in (
        "fake server itself",
        "new session per turn",
        "latency per token",
        "added per token",
    ):
        assert words in out
    assert out.count("ratio") == 5
