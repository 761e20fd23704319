"""A smoke run of the lifecycle benchmark: it must keep working, whatever the figures."""

from __future__ import annotations

import pytest

from bench import lifecycle


def test_lifecycle_bench_smoke(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    lifecycle.main(["--smoke", "--redis-url", redis_url])
    out = capsys.readouterr().out
    assert "enqueue -> job start" in out and "tasks/min" in out and "ratio" in out
    assert "NOT DELIVERED" not in out
