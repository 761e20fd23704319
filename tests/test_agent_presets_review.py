"""Claude Code and Codex resume their recorded session on a review run: the fake `claude`
and `codex` from tests/fakes/agents (documented output, line for line) fail a resume of a
session they do not keep, and write which session they resumed, so the new commit on the
branch shows the review run continued the delivering run's session."""

from __future__ import annotations

import pytest

from bot.lifecycle.states import TaskState
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person
from tests.test_agent_presets import fake_agents_on_path as fake_agents_on_path  # autouse
from tests.test_agent_presets import start

RESUMED = {"claude": "resumed session", "codex": "resumed thread"}


@pytest.mark.parametrize("agent", ["claude", "codex"])
async def test_a_review_run_resumes_the_agents_session(make: Make, agent: str) -> None:
    lc = await start(make, agent)
    issue = await lc.open_issue("Say hello", "Create hello.txt containing the word hello.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED and task.pr_number is not None
    session, branch = task.runtime_session, f"steelframe/issue-{issue}"
    assert session and lc.branch_file("hello.txt", branch) == "hello\n"
    pull = await lc.github.get_pull(lc.repo, task.pr_number)
    comment = await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{task.pr_number}/comments",
        {"body": "Say more.", "commit_id": pull.head.sha, "path": "hello.txt", "line": 1},
    )
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, [e.detail for e in lc.events(task.id)]
    written = lc.branch_file("hello.txt", branch) or ""
    assert written.startswith(f"{RESUMED[agent]} {session};")
    assert task.runtime_session == session
    head = (await lc.github.get_pull(lc.repo, task.pr_number)).head.sha
    comments = await lc.github.list_review_comments(lc.repo, task.pr_number)
    (reply,) = [c for c in comments if c.in_reply_to_id == comment["id"]]
    assert f"Addressed in {head}." in reply.body  # no answers file: the worker's own answer
