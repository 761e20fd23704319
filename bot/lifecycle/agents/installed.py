"""Which coding agents this machine has, at which version, and whether the presets support
that version (`steelframe doctor`)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from bot.lifecycle.agents.presets import PRESETS, Agent, Preset, version_in

VERSION_TIMEOUT_SECONDS = 20.0
Which = Callable[[str], str | None]
VersionOf = Callable[[str], str]


@dataclass(frozen=True)
class Found:
    preset: Preset
    path: str | None
    version: str | None
    problem: str | None = None

    @property
    def supported(self) -> bool:
        return self.version is not None and self.preset.supports(self.version)

    def verdict(self) -> str:
        if self.path is None:
            return f"not installed (install: {self.preset.install})"
        if self.version is None:
            return f"installed, version unknown ({self.problem or 'no version printed'})"
        if self.supported:
            return "supported"
        return f"unsupported version (the preset is written for {self.preset.pinned})"


def run_version(path: str) -> str:
    done = subprocess.run(
        [path, "--version"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=VERSION_TIMEOUT_SECONDS,
        check=False,
    )
    return done.stdout + done.stderr


def find(
    preset: Preset, *, which: Which = shutil.which, version_of: VersionOf = run_version
) -> Found:
    path = which(preset.binary)
    if path is None:
        return Found(preset, None, None)
    try:
        output = version_of(path)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Found(preset, path, None, f"`--version` failed: {type(exc).__name__}")
    return Found(preset, path, version_in(output))


def find_all(*, which: Which = shutil.which, version_of: VersionOf = run_version) -> list[Found]:
    return [find(PRESETS[agent], which=which, version_of=version_of) for agent in PRESETS]


def configured_problem(agent: str | None, found: list[Found]) -> str | None:
    """Why the configured agent cannot run here, or None."""
    if agent is None:
        return "no coding agent is configured (STEELFRAME_CODING_AGENT): tasks wait for info"
    if agent not in {a.value for a in PRESETS}:
        return None  # demo and command need no installed agent
    mine = next(f for f in found if f.preset.agent == Agent(agent))
    if mine.path is None or not mine.supported:
        return f"the configured agent, {mine.preset.label}, is {mine.verdict()}"
    return None


def agent_problem(agent: str | None, *, which: Which = shutil.which) -> str | None:
    """Why the configured agent cannot run on this machine (not installed, an unsupported
    version), or None: it can, or it is one that needs nothing installed (demo, command)."""
    if agent not in {a.value for a in PRESETS}:
        return None
    return configured_problem(agent, [find(PRESETS[Agent(agent)], which=which)])
