"""README's `STEELFRAME_CODING_AGENT=claude ANTHROPIC_API_KEY=... make run` on a machine
without Claude Code: dev's `coding:` line, and a worker's start-up warnings, say it is not
installed and how to install it, where they said only `coding: claude` (or nothing) and the
first task failed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def _without_claude() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
    # git, bwrap and the rest stay on PATH; no `claude` is found on it.
    env["PATH"] = os.pathsep.join(
        folder for folder in env["PATH"].split(os.pathsep) if not (Path(folder) / "claude").exists()
    )
    return env | {"STEELFRAME_CODING_AGENT": "claude", "ANTHROPIC_API_KEY": "sk-ant-test"}


NOT_INSTALLED = (
    "the configured agent, Claude Code, is not installed (install: npm install -g "
    "@anthropic-ai/claude-code@"
)


def test_dev_says_the_configured_agent_is_not_installed(tmp_path: Path) -> None:
    env = _without_claude()
    process = subprocess.Popen(
        [sys.executable, "-m", "steelframe.cli", "dev", "--port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    try:
        coding = next(line for line in process.stdout if line.startswith("coding: "))
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=120)
    assert coding.startswith(f"coding: claude · {NOT_INSTALLED}"), coding
    assert coding.rstrip().endswith("; its tasks fail until that is fixed (make doctor)")


def test_a_worker_warns_at_start_that_its_agent_is_not_installed(
    tmp_path: Path, redis_url: str
) -> None:
    env = _without_claude() | {
        "STEELFRAME_DATABASE_URL": f"sqlite:///{tmp_path / 'w.db'}",
        "STEELFRAME_DATA_DIR": str(tmp_path / "var"),
        "STEELFRAME_REDIS_URL": redis_url,
        "STEELFRAME_TASK_QUEUE": f"agent-missing-{os.getpid()}",
    }
    run = subprocess.run(
        [sys.executable, "-m", "steelframe.cli", "worker", "--burst"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    warned = [line for line in run.stderr.splitlines() if NOT_INSTALLED in line]
    assert warned and warned[0].startswith("steelframe worker: warning: "), run.stderr
    assert warned[0].endswith("; its tasks fail until that is fixed (steelframe doctor)")
