"""A repository's budget (`.steelframe/config.yml` `budget:`) reaches a coding-agent preset's
own cost limit (issue 34): Claude Code is started with `--max-budget-usd` of what is left of
the repository's budget, not of the installation's. Real service, GitHub sandbox, RQ worker,
the adapter and the fake `claude` (behind a wrapper that keeps its command line),
bubblewrap where it runs here."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from bot.lifecycle.states import TaskState
from tests.fakes.agents import BIN
from tests.fakes.coding import command
from tests.fakes.git import commit_files
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir


def _wrapped_claude(folder: Path) -> Path:
    """A `claude` first on PATH that appends its arguments to `folder`/claude-args.txt,
    then runs the fake Claude Code with them."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    bin_dir.chmod(0o755)
    wrapper = bin_dir / "claude"
    record = folder / "claude-args.txt"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> {shlex.quote(str(record))}\n'
        f'exec {shlex.quote(sys.executable)} {shlex.quote(str(BIN / "claude"))} "$@"\n'
    )
    wrapper.chmod(0o755)
    return record


@pytest.fixture
def claude_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    record = _wrapped_claude(exchange_dir(tmp_path))
    monkeypatch.setenv("PATH", f"{record.parent / 'bin'}:{BIN}:/usr/bin:/bin")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    return record


def _budget_flag(record: Path) -> str | None:
    (args,) = [line for line in record.read_text().splitlines() if line.strip()]
    words = args.split()
    return words[words.index("--max-budget-usd") + 1] if "--max-budget-usd" in words else None


async def _delivered(lc: Lifecycle, config: str) -> None:
    commit_files(
        lc.sandbox.sandbox.world.repo(lc.repo).git_path, {".steelframe/config.yml": config}
    )
    issue = await lc.open_issue("Say hello", "Create hello.txt containing the word hello.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, [e.detail for e in lc.events(task.id)]


async def test_a_preset_agent_is_told_the_repositorys_raised_budget(
    make: Make, claude_args: Path
) -> None:
    lc = await make(coding_agent="claude", task_max_cost_usd=1.0)
    await _delivered(lc, "budget:\n  usd: 5\n")
    # The installation's 1.00 would stop Claude Code itself below what the repository allows.
    assert _budget_flag(claude_args) == "5.0000"


async def test_a_preset_agent_is_told_a_budget_only_the_repository_sets(
    make: Make, claude_args: Path
) -> None:
    lc = await make(coding_agent="claude")
    await _delivered(lc, "budget:\n  usd: 0.75\n")
    assert _budget_flag(claude_args) == "0.7500"


async def test_an_infinite_budget_in_the_repository_config_fails_with_one_line(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    commit_files(
        lc.sandbox.sandbox.world.repo(lc.repo).git_path,
        {".steelframe/config.yml": "budget:\n  usd: .inf\n"},
    )
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    # As STEELFRAME_TASK_MAX_COST_USD=inf is refused at start-up: never passed on to an agent.
    assert task.state == TaskState.FAILED
    error = task.last_error or ""
    assert "budget.usd" in error and "finite" in error and "\n" not in error
    assert await lc.pulls() == []


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        ("tokens", "budget reached: spent 3,000 tokens (the coding agent's own limit)"),
        ("cost", "budget reached: spent 0.30 USD (the coding agent's own limit)"),
    ],
)
async def test_an_agents_own_limit_without_a_budget_waits_saying_so(
    make: Make, limit: str, said: str
) -> None:
    lc = await make(coding_command=command("own_limit", limit))  # no budget is set
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO, task.last_error
    assert task.question == said
    assert task.attempts == 1
