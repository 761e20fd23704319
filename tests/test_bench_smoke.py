"""A quick smoke run of each benchmark: they must keep working, whatever the figures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench import (
    chat_overhead,
    chat_streams,
    cli_startup,
    collector_startup,
    connects,
    frame_relay,
    gui,
    redaction,
    webhooks_probot,
)
from tests.fakes.tools import require_tool

pytestmark = pytest.mark.slow  # each benchmark starts its servers and clients as real processes


def test_chat_overhead_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    chat_overhead.main(["--smoke"])
    out = capsys.readouterr().out
    assert "request -> first status" in out and "blocking rps" in out and "ratio" in out


def test_cli_startup_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    cli_startup.main(["--smoke"])
    out = capsys.readouterr().out
    assert "steelframe --version" in out and "vs baseline" in out


def test_collector_startup_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    collector_startup.main(["--smoke"])
    out = capsys.readouterr().out
    assert "config --list" in out and "policy vs defaults" in out
    assert out.rstrip().endswith("x")


def test_redaction_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    redaction.main(["--log-mb", "0.05", "--tokens", "2"])
    out = capsys.readouterr().out
    assert "add a token" in out and "redact the log" in out and "x" in out.splitlines()[-1]


def test_worker_fork_memory_smoke() -> None:
    """In a process of its own: its horses collect garbage, and a test process's garbage
    may hold a database connection whose finaliser would talk on the socket they share."""
    bench = [sys.executable, "-m", "bench.worker_fork_memory", "--rounds", "1", "--job-mb", "1"]
    out = subprocess.run(bench, capture_output=True, text=True, timeout=120, check=True).stdout
    assert "frozen" in out and "plain fork" in out and out.rstrip().endswith("x")


def test_webhook_memory_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import webhook_memory

    webhook_memory.main(["--smoke"])
    out = capsys.readouterr().out
    assert "naive" in out and "steelframe vs naive" in out


def test_chat_streams_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    chat_streams.main(["--smoke"])
    out = capsys.readouterr().out
    assert "concurrent chat streams" in out and "ratio done p50" in out
    steelframe_row = next(line for line in out.splitlines() if line.startswith("  steelframe"))
    # name, done p50, done p99, first p50, first p99, errors, cpu, cpu/frame
    assert steelframe_row.split()[5] == "0"  # no stream failed
    assert "of first frames within 50 ms" in out  # serve's own figure, from its /metrics


def test_connects_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    connects.main(["--smoke"])
    out = capsys.readouterr().out
    assert "uvloop" in out and "serve's loop" in out and "ratio cpu" in out


def test_frame_relay_smoke(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    frame_relay.main(["--smoke", "--redis-url", redis_url])
    out = capsys.readouterr().out
    assert "batches of  1000" in out and out.count("ratio") == 4


def test_webhooks_against_probot_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    for tool, package in (("wrk", "wrk"), ("node", "nodejs"), ("npm", "npm")):
        require_tool(tool, package)
    webhooks_probot.main(["--smoke"])
    out = capsys.readouterr().out
    assert "probot" in out and "ratio rps" in out
    assert out.rstrip().endswith("acknowledged but not stored: 0")


def test_webhooks_through_nginx_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    for tool, package in (("wrk", "wrk"), ("node", "nodejs"), ("nginx", "nginx-light")):
        require_tool(tool, package)
    webhooks_probot.main(["--smoke", "--via-nginx"])
    out = capsys.readouterr().out
    assert "webhook intake on sqlite through nginx" in out and "ratio rps" in out
    assert out.rstrip().endswith("acknowledged but not stored: 0")


def test_gui_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    require_tool("chromium", "chromium")
    gui.main(["--smoke"])
    out = capsys.readouterr().out
    assert "load -> interactive" in out and "first delta -> frame" in out and "ratio" in out


def test_dev_loop_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import dev_loop

    dev_loop.main(["--smoke"])
    out = capsys.readouterr().out
    assert "filing -> PR" in out and "dev (no pacing)" in out
