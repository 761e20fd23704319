"""What a run that asks keeps for its continuation: everything it produced (the agent's
commits and what it left uncommitted, and the worker's own commits of the run), pushed as a
delivery pushes it; a run that asks having changed nothing pushes nothing
(docs/lifecycle.md, "Outcome")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import commit_files, remote_refs
from tests.fakes.lifecycle import DECISION, PATIENCE_SECONDS, Lifecycle, Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, require_bwrap

BOTH_SEEN = "COMMITTED.md: committed by the runtime\nUNCOMMITTED.md: left uncommitted\n"


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


async def _resumed_to_delivery(lc: Lifecycle, issue: int) -> str:
    """Answer the task's question; the continuation's branch once it delivered."""
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO
    await lc.github.create_comment(lc.repo, issue, f"{DECISION}\nGo on.")
    await lc.settle()
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    [pull] = await lc.pulls()
    return str(pull["head"]["ref"])


def _holds_all_of_it(lc: Lifecycle, branch: str) -> None:
    # The continuation started from everything the asking run produced ...
    assert lc.branch_file("SEEN.md", branch) == BOTH_SEEN
    # ... and the pull request holds all of it.
    assert lc.branch_file("COMMITTED.md", branch) == "committed by the runtime\n"
    assert lc.branch_file("UNCOMMITTED.md", branch) == "left uncommitted\n"


async def test_commits_and_uncommitted_changes_before_a_question_reach_the_continuation(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit_then_ask"))
    issue = await lc.open_issue("Do it in two parts")
    await lc.work()
    branch = f"steelframe/issue-{issue}"
    assert lc.branch_file("COMMITTED.md", branch) == "committed by the runtime\n"
    assert lc.branch_file("UNCOMMITTED.md", branch) == "left uncommitted\n"
    _holds_all_of_it(lc, await _resumed_to_delivery(lc, issue))


async def test_a_question_after_red_tests_keeps_the_work_the_worker_committed_for_them(
    make: Make,
) -> None:
    """The test command's check commits the agent's work before the agent's second run;
    that run asks, changing nothing more: the work committed for the check is pushed."""
    lc = await make(coding_command=command("commit_then_ask", "tested"))
    commit_files(
        lc.sandbox.sandbox.world.repo(lc.repo).git_path,
        {".steelframe/config.yml": 'test: "test -f SEEN.md"\n'},
    )
    issue = await lc.open_issue("Do it in two parts, tested")
    await lc.work()
    assert lc.task(issue).question == "The tests fail: go on?"
    branch = f"steelframe/issue-{issue}"
    assert lc.branch_file("COMMITTED.md", branch) == "committed by the runtime\n"
    assert lc.branch_file("UNCOMMITTED.md", branch) == "left uncommitted\n"
    _holds_all_of_it(lc, await _resumed_to_delivery(lc, issue))


async def test_a_question_asked_without_changing_anything_pushes_nothing(make: Make) -> None:
    lc = await make(coding_command=command("commit_then_ask", "quiet"))
    issue = await lc.open_issue("Ask first")
    await lc.work()
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO
    # No branch, and the run released its claim: the repository holds only its main.
    git_path = lc.sandbox.sandbox.world.repo(lc.repo).git_path
    assert set(remote_refs(git_path)) == {"refs/heads/main"}


def _branches(lc: Lifecycle) -> set[str]:
    git_path = lc.sandbox.sandbox.world.repo(lc.repo).git_path
    return {ref for ref in remote_refs(git_path) if ref.startswith("refs/heads/")}


async def test_a_run_that_fails_after_committing_pushes_nothing(make: Make) -> None:
    """A failed run's work is unfinished and unchecked: neither its commits nor its
    uncommitted changes are pushed (its worktree goes with it)."""
    lc = await make(coding_command=command("commit_then_ask", "fail"), task_max_attempts=1)
    issue = await lc.open_issue("Break part two")
    await lc.work()
    assert lc.task(issue).state == TaskState.FAILED
    assert _branches(lc) == {"refs/heads/main"}


async def test_a_run_terminated_after_committing_pushes_nothing(make: Make, tmp_path: Path) -> None:
    """The operator stopped it: nothing of the run becomes public after that."""
    started = exchange_dir(tmp_path) / "started"  # the runtime runs as nobody
    lc = await make(coding_command=command("commit_then_ask", "hold", started))
    issue = await lc.open_issue("Stop me")
    working = asyncio.create_task(lc.work())
    try:
        await wait_for(started.exists, within=PATIENCE_SECONDS)
        await lc.terminations.terminate(lc.task(issue).id, actor="operator")
        await asyncio.wait_for(working, PATIENCE_SECONDS)
    finally:
        if not working.done():
            working.cancel()
    assert lc.task(issue).state == TaskState.TERMINATED
    assert _branches(lc) == {"refs/heads/main"}
