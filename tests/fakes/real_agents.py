"""The real coding-agent CLIs for tests, at the versions the presets pin, installed from the
npm registry once into a cache folder (`STEELFRAME_TEST_AGENTS_CACHE`, default
`~/.cache/steelframe-agents`) and reused. Where npm or the registry is missing the tests say
they did not run, except under CI=true, where that is a failure.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.lifecycle.agents.presets import PRESETS, Agent

PACKAGES = {Agent.CLAUDE: "@anthropic-ai/claude-code", Agent.CODEX: "@openai/codex"}
INSTALL_TIMEOUT_SECONDS = 600
AIDER_PACKAGE = "aider-chat"


def cache_root() -> Path:
    configured = os.environ.get("STEELFRAME_TEST_AGENTS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "steelframe-agents"


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the real coding agents must run in CI: {why}")
    pytest.skip(f"real coding-agent tests did not run: {why}")


def real_agent_bin(agent: Agent) -> Path:
    """The `node_modules/.bin` holding the pinned release of `agent`, installed if needed."""
    preset = PRESETS[agent]
    folder = cache_root() / f"{agent.value}-{preset.pinned}"
    binary = folder / "node_modules" / ".bin" / preset.binary
    if binary.exists():
        return binary.parent
    npm = shutil.which("npm")
    if npm is None:
        _unavailable("npm is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    # One installer at a time per folder (parallel test sessions share the cache).
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            spec = f"{PACKAGES[agent]}@{preset.pinned}"
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), spec],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_SECONDS,
                check=False,
            )
            if done.returncode != 0 or not binary.exists():
                _unavailable(f"`npm install {spec}` failed: {done.stderr.strip()[-300:]}")
    return binary.parent


def real_aider_bin() -> Path:
    """The `bin` of a virtualenv of its own holding the pinned aider, from PyPI."""
    pinned = PRESETS[Agent.AIDER].pinned
    folder = cache_root() / f"aider-{pinned}"
    binary = folder / "bin" / "aider"
    if binary.exists():
        return binary.parent
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".aider-{pinned}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            steps = [
                ["python3", "-m", "venv", str(folder)],
                [str(folder / "bin" / "pip"), "install", "--quiet", f"{AIDER_PACKAGE}=={pinned}"],
            ]
            for step in steps:
                done = subprocess.run(
                    step,
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_TIMEOUT_SECONDS,
                    check=False,
                )
                if done.returncode != 0:
                    _unavailable(f"`{' '.join(step)}` failed: {done.stderr.strip()[-300:]}")
    return binary.parent
