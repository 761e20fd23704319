"""Tokens scoped to the task: over a whole task run (pickup, progress comments, labels,
clone, push, the pull request, delivery), every request the worker and the service made
as the App's installation carried a token for the task's repository alone, with the
least permission that request needs; none was made with the installation's full token."""

from __future__ import annotations

from bot.lifecycle.states import TaskState
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
