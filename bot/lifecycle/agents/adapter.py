"""Runs one agent preset as a coding command (docs/lifecycle.md, "The coding command"):
the prompt on stdin and the protocol's environment in, the agent's own output parsed into
protocol lines out. Run as `python -I -m bot.lifecycle.agents.adapter claude|codex|aider`.

Settings come in the protocol's environment: `STEELFRAME_AGENT_MODEL`,
`STEELFRAME_AGENT_MAX_TURNS`, `STEELFRAME_AGENT_BUDGET_USD`, `STEELFRAME_AGENT_PRICES`
(JSON `{"input", "output"}` USD per million tokens), `STEELFRAME_AGENT_HOME` (kept between
the runs of a task, so a resumed session finds its files), and `STEELFRAME_RESUME_SESSION`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bot.contracts.coding_protocol import AgentEvent, Result, line
from bot.lifecycle.agents import aider, claude, codex
from bot.lifecycle.agents.base import AgentRun, Launch, Parser, failed, log
from bot.lifecycle.agents.presets import PRESETS, Agent, agent_environment


def emit(event: AgentEvent) -> None:
    """One protocol line on stdout, rendered as the worker's run log has always kept it."""
    print(line(event), flush=True)


def agent_run(prompt: str, cwd: Path, env: Mapping[str, str]) -> AgentRun:
    budget = env.get("STEELFRAME_AGENT_BUDGET_USD")
    return AgentRun(
        prompt=prompt,
        cwd=cwd,
        model=env.get("STEELFRAME_AGENT_MODEL") or None,
        max_turns=int(env.get("STEELFRAME_AGENT_MAX_TURNS") or 50),
        budget_usd=float(budget) if budget else None,
        resume=env.get("STEELFRAME_RESUME_SESSION") or None,
        decision=env.get("STEELFRAME_DECISION") or None,
    )


# aider keeps a copy of litellm's price list of its own (aider/models.py, ModelInfoManager,
# 0.86): for a model not in its bundled metadata it reads this file in its home, and downloads
# the list from raw.githubusercontent.com when the file is missing, a day old or an empty
# object (what it writes after a failed download, so every run asked again), which the run's
# egress proxy refuses and the task shows. There is no switch: a fresh file with an entry keeps
# it from asking. The seed's one entry names no model, so a model's prices still come from
# litellm's shipped copy (aider.QUIET_ENV), as they did once the download was refused.
AIDER_PRICES = Path(".aider", "caches", "model_prices_and_context_window.json")
AIDER_PRICES_SEED = {"steelframe-seed": {"note": "kept by Steelframe so aider asks no network"}}


def seed_aider_prices(home: Path) -> Path:
    """aider's price list in the agent's `home`, as one it reads as fresh before each run: a
    list of prices kept there (a user's own home) is touched, anything else (missing, empty,
    not JSON) replaced by the seed. The home is kept between a task's runs, which may be more
    than a day apart."""
    cache = home / AIDER_PRICES
    try:
        kept = json.loads(cache.read_bytes())
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, dict) and kept:
        os.utime(cache)
    else:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(AIDER_PRICES_SEED))
    return cache


def prepare(agent: Agent, run: AgentRun, scratch: Path, home: Path) -> tuple[Launch, Parser]:
    if agent == Agent.CLAUDE:
        if run.resume and not claude.carry_session(home, run.cwd, run.resume):
            emit(log("the earlier Claude Code session is not kept here; starting a new one"))
            run = dataclasses.replace(run, resume=None)
        return claude.launch(run), claude.ClaudeParser()
    if agent == Agent.CODEX:
        prices = json.loads(os.environ.get("STEELFRAME_AGENT_PRICES") or "{}")
        launch = codex.launch(run, base_url=os.environ.get("OPENAI_BASE_URL"))
        home_env = {"CODEX_HOME": str(home / ".codex")}
        (home / ".codex").mkdir(parents=True, exist_ok=True)
        return Launch(launch.argv, launch.stdin, home_env), codex.CodexParser(prices)
    seed_aider_prices(home)
    return aider.launch(run, scratch), aider.AiderParser()


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def changed(cwd: Path, head_before: str) -> bool:
    """Whether the agent left any change in the checkout: files (aider's own aside) or
    commits of its own."""
    status = _git(cwd, "status", "--porcelain", "--untracked-files=all")
    dirty = [line for line in status.splitlines() if ".aider" not in line]
    return bool(dirty) or _git(cwd, "rev-parse", "HEAD") != head_before


def run_agent(agent: Agent, run: AgentRun, home: Path) -> Result:
    head_before = _git(run.cwd, "rev-parse", "HEAD")
    with tempfile.TemporaryDirectory(prefix="steelframe-agent-") as scratch:
        launch, parser = prepare(agent, run, Path(scratch), home)
        env = {**agent_environment(os.environ, PRESETS[agent]), "HOME": str(home), **launch.env}
        try:
            process = subprocess.Popen(
                launch.argv,
                cwd=run.cwd,
                env=env,
                stdin=subprocess.PIPE if launch.stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
            )
        except OSError as exc:
            return failed(
                f"{PRESETS[agent].label} is not installed or cannot start ({exc.strerror}); "
                "see docs/runtimes.md"
            )
        if launch.stdin is not None:
            assert process.stdin is not None
            try:
                process.stdin.write(launch.stdin)
                process.stdin.close()
            except BrokenPipeError:
                pass
        assert process.stdout is not None
        for printed in process.stdout:
            for event in parser.feed(printed.rstrip("\n")):
                emit(event)
        code = process.wait()
        if agent == Agent.AIDER:
            aider.remove_caches(run.cwd)
        return parser.result(code, changed=changed(run.cwd, head_before))


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in {a.value for a in PRESETS}:
        print(f"usage: adapter {'|'.join(a.value for a in PRESETS)}", file=sys.stderr)
        return 2
    agent = Agent(argv[0])
    run = agent_run(sys.stdin.read(), Path.cwd(), os.environ)
    home = Path(os.environ.get("STEELFRAME_AGENT_HOME") or os.environ.get("HOME") or "/tmp")
    home.mkdir(parents=True, exist_ok=True)
    emit(run_agent(agent, run, home))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
