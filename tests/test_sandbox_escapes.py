"""A hostile coding runtime in the real sandbox, trying what `tests/fakes/coding/attacker.py`
does not: what it leaves in its checkout for the worker's own git to run later, outside the
sandbox. Where bubblewrap cannot run these tests say they did not run, except under
CI=true, where they fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.lifecycle.states import TaskState
from tests.conftest import GitHubSandbox
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, require_bwrap


# The fix is in bot/lifecycle/worktree.py (not this helper's file): see this commit's message.
@pytest.mark.xfail(
    strict=True, reason="the worker's `git add`/`git status` run a planted repository's filter"
)
async def test_a_repository_planted_in_the_checkout_runs_nothing_in_the_worker(
    make: Make, github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    """A git repository inside the checkout becomes a gitlink when the worker commits;
    `git status` then looks into it, and a clean filter its config names would run as the
    worker, with everything the sandbox hides in reach (here: the App key)."""
    require_bwrap()
    key_file = tmp_path / "app-key.pem"  # outside the sandbox, readable by the worker
    key_file.write_text(github_sandbox.private_key)
    marker = exchange_dir(tmp_path) / "stolen-key"
    lc = await make(coding_command=command("embedded_repo", key_file, marker))
    issue = await lc.open_issue("Vendor the library")
    await lc.work()
    assert not marker.exists(), "the planted filter ran outside the sandbox"
    assert lc.task(issue).state == TaskState.DELIVERED
    branch = f"steelframe/issue-{issue}"
    assert lc.branch_file("CHANGE.md", branch) == "A change beside a vendored library\n"
