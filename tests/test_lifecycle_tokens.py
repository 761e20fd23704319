"""Tokens scoped to the task: over a whole task run (pickup, progress comments, labels,
clone, push, the pull request, delivery), every request the worker and the service made
as the App's installation carried a token for the task's repository alone, with the
least permission that request needs; none was made with the installation's full token.
The jobs of one process share their tokens."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.lifecycle.context import github_factory
from bot.lifecycle.states import TaskState
from tests.conftest import GitHubSandbox
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.test_sandbox_scoped_tokens import scope_problems

TOKENS = "/app/installations/{installation_id}/access_tokens"


async def test_a_whole_task_run_uses_only_tokens_scoped_to_its_repository(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue("Make the widget blue")
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    traffic = lc.sandbox.sandbox.traffic
    assert scope_problems(lc.sandbox, lc.repo) == []
    served = {(ex.method, ex.route) for ex in traffic if ex.status < 400}
    # The run's own effects were among them: its comments, labels and pull request.
    assert {
        ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
        ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels"),
        ("POST", "/repos/{owner}/{repo}/pulls"),
    } <= served
    asked = [ex.request for ex in traffic if ex.route == TOKENS]
    name = lc.repo.split("/")[1]
    assert asked and all(body["repositories"] == [name] for body in asked)
    # The git steps had tokens of their own: read to clone, write to claim and push.
    git = {
        tuple(body["permissions"].items()) for body in asked if "contents" in body["permissions"]
    }
    assert git == {(("contents", "read"),), (("contents", "write"),)}


async def test_the_jobs_of_one_process_mint_each_token_once(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    """Each job (and each periodic reconcile pass) builds its own App client on its own event
    loop; they share the process's tokens, so a scope is minted once while it is current,
    not once a job (a worker at rest minted one a minute for its reconcile pass)."""
    factory = github_factory(github_sandbox.settings(tmp_path))
    assert factory is not None

    def job() -> str:
        async def run() -> str:
            async with factory() as github:
                return (await github.get_repo(github_sandbox.repo)).full_name

        return asyncio.run(run())

    for _ in range(3):  # one after another, each on a thread of its own, as a worker runs them
        assert await asyncio.to_thread(job) == github_sandbox.repo
    minted = [ex for ex in github_sandbox.sandbox.traffic if ex.route == TOKENS]
    assert len(minted) == 1, [ex.request for ex in minted]
