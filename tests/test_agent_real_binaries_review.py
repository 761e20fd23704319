"""The real Claude Code and Codex CLIs resume their session on a review run: against the
loopback fake model servers (tests/test_agent_real_binaries.py), the review run's first
model request carries the delivering run's conversation, and its edit lands as a new
commit on the pull request's branch with a reply on the thread."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bot.lifecycle.agents.presets import Agent
from bot.lifecycle.states import TaskState
from tests.fakes.anthropic_server import FakeAnthropic, answer, tool_round
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person
from tests.fakes.real_agents import real_agent_bin
from tests.fakes.responses_server import FakeResponses, Run, Say
from tests.test_agent_real_binaries import KEY, MODEL, _endpoint
from tests.test_agent_real_binaries import anthropic as anthropic  # fixture
from tests.test_agent_real_binaries import data_outside_tmp as data_outside_tmp  # fixture
from tests.test_agent_real_binaries import responses as responses  # fixture

ISSUE = "Create hello.txt containing the word hello."


async def _review(lc: Lifecycle, issue: int) -> tuple[int, int]:
    """A writer's comment on the delivered pull request: (pull number, comment id)."""
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, [e.detail for e in lc.events(task.id)]
    assert task.pr_number is not None
    pull = await lc.github.get_pull(lc.repo, task.pr_number)
    comment = await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{task.pr_number}/comments",
        {"body": "Say hi too.", "commit_id": pull.head.sha, "path": "hello.txt", "line": 1},
    )
    return task.pr_number, int(comment["id"])


async def _answered(lc: Lifecycle, issue: int, number: int, comment: int) -> None:
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, [e.detail for e in lc.events(task.id)]
    assert lc.branch_file("hello.txt", f"steelframe/issue-{issue}") == "hello hi\n"
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    replies = [c for c in await lc.github.list_review_comments(lc.repo, number) if c.in_reply_to_id]
    assert [r.in_reply_to_id for r in replies] == [comment]
    assert f"Addressed in {head}." in replies[0].body


@pytest.mark.slow
async def test_real_claude_code_resumes_its_session_on_a_review(
    make: Make, anthropic: tuple[FakeAnthropic, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    binaries = real_agent_bin(Agent.CLAUDE)
    fake, url = anthropic
    first = {"command": "echo hello > hello.txt", "description": "Create hello.txt"}
    fix = {"command": "echo hello hi > hello.txt", "description": "Say hi too"}
    fake.enqueue(
        MODEL,
        tool_round(("Bash", first), text="I'll create the file.", thinking="Use the shell."),
        answer("Done: created hello.txt.", thinking="It is done."),
        tool_round(("Bash", fix), text="I'll add hi.", thinking="The reviewer asks."),
        answer("Done: added hi.", thinking="It is done."),
    )
    monkeypatch.setenv("PATH", f"{binaries}:{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    values: dict[str, Any] = {"coding_agent": "claude", "coding_model": MODEL}
    lc = await make(**values, task_time_limit=120, egress_private=(_endpoint(url),))
    issue = await lc.open_issue("Say hello", ISSUE)
    await lc.work()
    number, comment = await _review(lc, issue)
    await lc.work()
    await _answered(lc, issue, number, comment)
    assert len(fake.requests) == 4
    # Resumed: the review run's first request carries the first run's conversation.
    review_run = str(fake.requests[2].body["messages"])
    assert ISSUE in review_run and "Done: created hello.txt." in review_run
    assert "review-thread" in review_run and "Say hi too." in review_run


@pytest.mark.slow
async def test_real_codex_cli_resumes_its_thread_on_a_review(
    make: Make,
    responses: tuple[FakeResponses, str],
    monkeypatch: pytest.MonkeyPatch,
    data_outside_tmp: Path,
) -> None:
    binaries = real_agent_bin(Agent.CODEX)
    fake, url = responses
    fake.enqueue(
        [Say("I'll create the file."), Run("echo hello > hello.txt")],
        [Say("Done: created hello.txt.")],
        [Say("I'll add hi."), Run("echo hello hi > hello.txt")],
        [Say("Done: added hi.")],
    )
    monkeypatch.setenv("PATH", f"{binaries}:{os.environ['PATH']}")
    monkeypatch.setenv("CODEX_API_KEY", "sk-codex-test")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    lc = await make(
        coding_agent="codex",
        coding_model="gpt-5-codex",
        model_prices={"gpt-5-codex": {"input": 1.25, "output": 10.0}},
        task_time_limit=120,
        data_dir=data_outside_tmp,
        egress_private=(_endpoint(url),),
    )
    issue = await lc.open_issue("Say hello", ISSUE)
    await lc.work()
    number, comment = await _review(lc, issue)
    await lc.work()
    await _answered(lc, issue, number, comment)
    assert len(fake.requests) == 4
    review_run = str(fake.requests[2]["input"])
    assert ISSUE in review_run and "Done: created hello.txt." in review_run
    assert "review-thread" in review_run and "Say hi too." in review_run
