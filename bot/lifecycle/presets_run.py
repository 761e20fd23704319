"""What a run adds when a coding-agent preset (not a protocol-speaking command) runs: the
adapter's environment, the agent's home kept between a task's runs, and the progress
comment edited with the agent's steps (docs/runtimes.md, "Coding agents")."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.lifecycle.agents.presets import PRESETS, Agent
from bot.lifecycle.agents.tally import Tally
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.models import Task
from bot.lifecycle.progress import Phase, update_progress
from bot.lifecycle.scope import Run


def preset_label(ctx: LifecycleContext) -> str | None:
    """The agent's name when a preset (not a protocol-speaking command) runs."""
    agent = ctx.policy.coding_agent
    preset = PRESETS.get(Agent(agent)) if agent else None
    return preset.label if preset else None


def agent_home(ctx: LifecycleContext, task: Task) -> Path:
    """Kept between the runs of a task, so a resumed session finds its files; the sandbox
    shows it to the runtime read-write at the same path."""
    home = (ctx.settings.data_dir / "agent-homes" / f"task-{task.id}").resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


def agent_env(ctx: LifecycleContext, task: Task, home: Path) -> dict[str, str]:
    """What the adapter of a preset needs to know."""
    policy = ctx.policy
    env = {"STEELFRAME_AGENT_MAX_TURNS": str(policy.max_turns), "STEELFRAME_AGENT_HOME": str(home)}
    if policy.coding_model:
        env["STEELFRAME_AGENT_MODEL"] = policy.coding_model
    if policy.max_cost_usd is not None:
        env["STEELFRAME_AGENT_BUDGET_USD"] = f"{max(policy.max_cost_usd - task.cost_usd, 0):.4f}"
    if policy.coding_prices:
        env["STEELFRAME_AGENT_PRICES"] = json.dumps(policy.coding_prices)
    return env


def progress_hook(
    run: Run, label: str
) -> tuple[Callable[[str, str], None], list[asyncio.Future[Any]]]:
    """Count the agent's steps; edit the progress comment with them, throttled."""
    ctx, task = run.ctx, run.task
    tally = Tally()
    pending: list[asyncio.Future[Any]] = []
    note = f"Attempt {task.attempts} of {ctx.policy.max_attempts} is running."

    def on_progress(action: str, name: str) -> None:
        # The name is the runtime's word, shown on the issue: public text like its others.
        tally.add(action, run.public(name, 60))
        if not tally.due(time.monotonic()) or any(not f.done() for f in pending):
            return
        words = f"{note}\n\n{tally.words(label)}"
        pending.append(
            asyncio.ensure_future(
                update_progress(
                    ctx.db, run.github, task.id, Phase.RUNNING, words, create=False, clock=ctx.clock
                )
            )
        )

    return on_progress, pending
