"""Only the App or someone with write access starts a task from an `issues` event: an
author without it reopening their labeled issue is recorded and ignored."""

from __future__ import annotations

import aiohttp

from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def _close_and_reopen_as(
    lc: Lifecycle, login: str, issue: int, permission: str | None
) -> None:
    token = lc.sandbox.user_token(login, permission)
    async with aiohttp.ClientSession() as http:
        for state in ("closed", "open"):
            response = await http.patch(
                f"{lc.sandbox.url}/repos/{lc.repo}/issues/{issue}",
                json={"state": state},
                headers={"Authorization": f"token {token}"},
            )
            assert response.status == 200, await response.text()
            # Each step reaches the service before the next, as a person's clicks do: a
            # close read after the reopen finds the issue open (outdated), and a reopen in
            # the same second as the pickup the task followed is then that pickup again.
            await lc.settle()


async def _terminated_task(lc: Lifecycle) -> tuple[int, int]:
    issue = await lc.open_issue("Make the widget blue")
    task_id = lc.task(issue).id
    await lc.terminations.terminate(task_id, actor="operator")
    assert lc.task(issue).state == TaskState.TERMINATED
    return issue, task_id


async def test_a_reopen_by_a_user_without_write_access_starts_nothing(make: Make) -> None:
    lc = await make()
    issue, task_id = await _terminated_task(lc)
    await _close_and_reopen_as(lc, "mallory", issue, permission=None)
    assert lc.task(issue).state == TaskState.TERMINATED
    assert lc.queued_jobs() == []
    ignored = [e for e in lc.events(task_id) if e.kind == EventKind.PICKUP_IGNORED]
    assert len(ignored) == 1 and ignored[0].actor == "mallory"
    assert "mallory has read access" in ignored[0].detail and "write access" in ignored[0].detail


async def test_a_reopen_by_a_collaborator_with_write_access_starts_the_task_again(
    make: Make,
) -> None:
    lc = await make()
    issue, _ = await _terminated_task(lc)
    await _close_and_reopen_as(lc, "maintainer", issue, permission="write")
    assert lc.task(issue).state == TaskState.QUEUED
    assert len(lc.queued_jobs()) == 1
