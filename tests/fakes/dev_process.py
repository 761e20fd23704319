"""`steelframe dev` in a shell configured for production, as a test starts it: the shell's
settings point at a production database, Redis and data folder of the test's own, and dev
runs until it has printed its token line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.patience import PATIENCE_SECONDS

# What configures a service from the environment: left out of a test's shell but for what
# the test sets.
CONFIG_VARS = ("STEELFRAME_", "APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET", "GITHUB_API_URL")


def unconfigured_shell() -> dict[str, str]:
    """This environment without any of the service's settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(CONFIG_VARS)}


def steelframe_cli(cwd: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """`steelframe ARGV` run to its end in `cwd`, its output read as text."""
    return subprocess.run(
        [sys.executable, "-m", "steelframe.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE_SECONDS,
    )


def production_shell(tmp_path: Path, redis_url: str) -> dict[str, str]:
    """An environment configured for production: its database, Redis and data folder."""
    env = unconfigured_shell()
    env.update(
        STEELFRAME_DATABASE_URL=f"sqlite:///{tmp_path / 'production.db'}",
        STEELFRAME_REDIS_URL=redis_url,
        STEELFRAME_DATA_DIR=str(tmp_path / "production-data"),
    )
    return env


def popen_dev(cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """`steelframe dev --port 0` started in `cwd`, its output (stderr with it) piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "steelframe.cli", "dev", "--port", "0"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def lines_through(process: subprocess.Popen[str], prefix: str) -> list[str]:
    """The process's output lines up to the first starting with `prefix` (all of it, if it
    ends first)."""
    lines: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if line.startswith(prefix):
            break
    return lines


@dataclass
class RunningDev:
    pid: int
    said: list[str] = field(default_factory=list)  # its output, up to its `token:` line


@contextmanager
def dev_up_to_its_token(cwd: Path, env: dict[str, str]) -> Iterator[RunningDev]:
    """`steelframe dev --port 0` in `cwd`, once it has printed its `token:` line; stopped
    (SIGTERM, then waited for) when the block ends."""
    dev = popen_dev(cwd, env)
    running = RunningDev(dev.pid)
    try:
        running.said.extend(lines_through(dev, "token: "))
        yield running
    finally:
        dev.terminate()
        dev.wait(timeout=PATIENCE_SECONDS)
