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
import sys
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
            steps = _aider_install_steps(folder, f"{AIDER_PACKAGE}=={pinned}")
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


def _aider_install_steps(folder: Path, requirement: str) -> list[list[str]]:
    """A virtualenv at `folder` holding `requirement`: with uv where the project's venv has
    it (the Makefile installs it there), else with the venv's own pip. pip took 45 s of wall
    and 41 s of CPU for aider's hundred packages even from a warm cache, uv 1.2 s
    (2026-12-07): on a machine new to the test, most of the real aider test's time."""
    uv = Path(sys.executable).parent / "uv"
    if uv.exists():
        return [
            [str(uv), "venv", "--quiet", "--python", "python3", str(folder)],
            [
                str(uv),
                "pip",
                "install",
                "--quiet",
                "--python",
                str(folder / "bin" / "python"),
                requirement,
            ],
        ]
    return [
        ["python3", "-m", "venv", str(folder)],
        [str(folder / "bin" / "pip"), "install", "--quiet", requirement],
    ]
