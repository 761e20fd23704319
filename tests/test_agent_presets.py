"""Each coding-agent preset end to end: the real lifecycle (Redis, RQ, the GitHub sandbox,
a real worktree) runs the adapter, which runs the fake `claude`, `codex` or `aider` from
tests/fakes/agents (documented output, line for line), through success, failure, a
question and its resume, a hang killed at the time limit, and cost accounting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from tests.fakes.agents import BIN
from tests.fakes.lifecycle import DECISION, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

AGENTS = ["claude", "codex", "aider"]
# What each fake reports for its successful run (coding-agents.md 1.6, 2.6, 3.5).
TOKENS = {"claude": 240 + 38, "codex": 2400 + 80 + 20, "aider": 2100 + 120}
# Codex reports tokens only: its cost comes from STEELFRAME_MODEL_PRICES for the model.
PRICES = {"gpt-5-codex": {"input": 1.25, "output": 10.0}}
COST = {"claude": 0.00129, "codex": (2400 * 1.25 + 100 * 10.0) / 1e6, "aider": 0.0081}
LABEL = {"claude": "Claude Code", "codex": "Codex CLI", "aider": "aider"}


@pytest.fixture(autouse=True)
def fake_agents_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{BIN}:{Path('/usr/bin')}:{Path('/bin')}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("CODEX_API_KEY", "sk-codex-test")


async def start(make: Make, agent: str, **overrides: Any) -> Lifecycle:
    values: dict[str, Any] = {"coding_agent": agent, "coding_model": "gpt-5-codex"}
    values["model_prices"] = PRICES
    values.update(overrides)
    return await make(**values)


def shown_progress(lc: Lifecycle, words: str) -> bool:
    """The sticky comment was edited with the agent's progress while it ran."""
    return any(
        exchange.method == "PATCH" and words in str((exchange.request or {}).get("body", ""))
        for exchange in lc.sandbox.sandbox.traffic
    )


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_preset_delivers_with_its_usage_and_cost(make: Make, agent: str) -> None:
    lc = await start(make, agent)
    issue = await lc.open_issue("Say hello", "Create hello.txt containing the word hello.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, [e.detail for e in lc.events(task.id)]
    assert lc.branch_file("hello.txt", f"steelframe/issue-{issue}") == "hello\n"
    assert task.tokens_used == TOKENS[agent]
    assert task.cost_usd == pytest.approx(COST[agent])
    assert shown_progress(lc, f"{LABEL[agent]} is working: ")
    # No aider history files or tags cache, no .gitignore line on the branch.
    tree = lc.branch_file("", f"steelframe/issue-{issue}") or ""
    assert ".aider" not in tree and ".gitignore" not in tree
    if agent == "aider":
        assert task.runtime_session is None
    else:
        assert task.runtime_session  # the session/thread id, kept for a resume


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_failing_agent_is_retried_then_fails(make: Make, agent: str) -> None:
    lc = await start(make, agent, task_max_attempts=2)
    issue = await lc.open_issue("Break scenario:api_error", "The model API is down today.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.FAILED and task.attempts == 2
    failure = [c["body"] for c in await lc.comments(issue) if "failed" in c["body"].lower()]
    assert failure, "no failure comment"
    assert await lc.pulls() == []


@pytest.mark.parametrize("agent", AGENTS)
async def test_an_agent_that_changes_nothing_fails_without_a_pull_request(
    make: Make, agent: str
) -> None:
    lc = await start(make, agent, task_max_attempts=1)
    issue = await lc.open_issue("Nothing scenario:no_change", "There is nothing to do here.")
    await lc.work()
    assert lc.task(issue).state == TaskState.FAILED
    assert await lc.pulls() == []


@pytest.mark.parametrize("agent", AGENTS)
async def test_an_agents_question_waits_and_the_decision_resumes_its_session(
    make: Make, agent: str
) -> None:
    lc = await start(make, agent)
    issue = await lc.open_issue("Cache scenario:question", "Add a cache to the widget lookup.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO
    assert task.question == "Should the cache use Redis or SQLite?"
    first_session = task.runtime_session
    await lc.github.create_comment(lc.repo, issue, f"{DECISION}\nUse Redis.")
    await lc.settle()
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, [e.detail for e in lc.events(task.id)]
    written = lc.branch_file("hello.txt", f"steelframe/issue-{issue}") or ""
    if agent == "claude":
        assert written == f"resumed session {first_session}; prompt carries the decision: True\n"
    elif agent == "codex":
        assert written == f"resumed thread {first_session}; prompt carries the decision: True\n"
    else:
        assert written == "decided: The decision was applied\n"
    assert task.runtime_session == first_session


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_hanging_agent_is_killed_at_the_time_limit(make: Make, agent: str) -> None:
    lc = await start(make, agent, task_time_limit=2)
    issue = await lc.open_issue("Stuck scenario:hang", "The network is down for this one.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.FAILED
    limits = [e for e in lc.events(task.id) if e.kind == EventKind.LIMIT_EXCEEDED]
    assert limits and limits[0].data == {"limit": "time"}


async def test_claudes_turn_limit_fails_the_task_naming_the_limit(make: Make) -> None:
    lc = await start(make, "claude", coding_max_turns=3, task_max_attempts=3)
    issue = await lc.open_issue("Long scenario:max_turns", "This takes many turns to do.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.FAILED and task.attempts == 1  # a limit: not retried
    bodies = " ".join(c["body"] for c in await lc.comments(issue))
    assert "STEELFRAME_CODING_MAX_TURNS" in bodies


async def test_claudes_permission_denial_is_a_failure_not_a_silent_success(make: Make) -> None:
    lc = await start(make, "claude", task_max_attempts=1)
    issue = await lc.open_issue("Denied scenario:denied", "Write hello.txt please, now.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.FAILED
    failed = [e for e in lc.events(task.id) if e.to_state == TaskState.FAILED]
    assert "denied permission (Write)" in str(failed[-1].data)


async def test_the_task_cost_limit_stops_an_agent_that_spends_too_much(make: Make) -> None:
    lc = await start(make, "claude", task_max_cost_usd=1.0)
    issue = await lc.open_issue("Pricey scenario:spend", "This run costs a lot of money.")
    await lc.work()
    task = lc.task(issue)
    # A budget reached waits for a person (issue 34).
    assert task.state == TaskState.WAITING_FOR_INFO and task.cost_usd == pytest.approx(2.5)
    assert task.question == "budget reached: spent 2.50 USD of 1.00"
    limits = [e for e in lc.events(task.id) if e.kind == EventKind.LIMIT_EXCEEDED]
    assert limits and limits[0].data == {"limit": "cost"}


async def test_aider_with_malformed_edits_fails_and_retries(make: Make) -> None:
    lc = await start(make, "aider", task_max_attempts=2)
    issue = await lc.open_issue("Odd scenario:malformed", "The model answers in a bad format.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.FAILED and task.attempts == 2
    assert task.cost_usd == pytest.approx(0.0081 * 2)


async def test_an_agent_sees_its_own_key_and_no_other_variable_of_the_worker(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-chat-model-key")
    monkeypatch.setenv("DATABASE_PASSWORD", "hunter2")
    monkeypatch.setenv("CLAUDE_CODE_USE_BEDROCK", "0")
    lc = await start(make, "claude")
    issue = await lc.open_issue("Env scenario:env", "Write the names of your variables down.")
    await lc.work()
    names = set((lc.branch_file("hello.txt", f"steelframe/issue-{issue}") or "").split())
    assert {"ANTHROPIC_API_KEY", "CLAUDE_CODE_USE_BEDROCK", "PATH", "HOME"} <= names
    assert not names & {"OPENAI_API_KEY", "CODEX_API_KEY", "DATABASE_PASSWORD"}
    assert not any(name.startswith("STEELFRAME_") for name in names)
