"""A task's pull request closed without a merge and then reopened (people close and reopen one
to run its CI again): the task is `delivered` again, on the issue and in memory, and what
follows counts again (a merge makes it `merged`). A redelivered reopen changes nothing; a
terminated task stays terminated; a merged pull request cannot be reopened. Real RQ workers,
the GitHub sandbox, SQLite and PostgreSQL."""

from __future__ import annotations

import aiohttp
from sqlalchemy import select

from bot.lifecycle.states import TaskState
from memory.models import MemoryChunk
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull, send_again
from tests.test_lifecycle_terminate_pull import terminated_with_its_pull_open


def _outcome(lc: Lifecycle, number: int) -> str:
    key = f"pull-outcome:{lc.repo}#{number}"
    found: str = lc.ctx.db.call(
        lambda s: s.scalar(
            select(MemoryChunk.text).where(MemoryChunk.key == key, MemoryChunk.live.is_(True))
        )
    )
    return found


async def _set_state(lc: Lifecycle, number: int, state: str) -> None:
    await as_person(lc, "maintainer", "PATCH", f"/pulls/{number}", {"state": state})


async def test_a_reopened_pull_request_makes_its_task_delivered_and_its_merge_counts(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    await _set_state(lc, number, "closed")
    assert lc.task(issue).state == TaskState.CLOSED
    await _set_state(lc, number, "open")
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED
    labels = await lc.labels(issue)
    assert "steelframe:delivered" in labels and "steelframe:closed" not in labels
    last = lc.events(task.id)[-1]
    assert (last.from_state, last.to_state) == (TaskState.CLOSED, TaskState.DELIVERED)
    assert f"#{number} reopened by maintainer" in last.detail
    assert "was reopened by maintainer" in _outcome(lc, number)
    events = len(lc.events(task.id))
    await send_again(lc, "pull_request", "reopened", times=2)
    assert lc.task(issue).state == TaskState.DELIVERED and len(lc.events(task.id)) == events

    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    assert lc.task(issue).state == TaskState.MERGED
    assert "was merged by maintainer" in _outcome(lc, number)
    # GitHub refuses to reopen a merged pull request; nothing changes.
    token = lc.sandbox.user_token("maintainer", "write")
    async with aiohttp.ClientSession() as http:
        refused = await http.patch(
            f"{lc.sandbox.url}/repos/{lc.repo}/pulls/{number}",
            json={"state": "open"},
            headers={"Authorization": f"token {token}"},
        )
        assert refused.status == 422
        assert "cannot be reopened" in (await refused.text())
    assert lc.task(issue).state == TaskState.MERGED


async def test_a_terminated_tasks_pull_request_reopened_leaves_it_terminated(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await terminated_with_its_pull_open(lc)
    await _set_state(lc, number, "closed")
    await _set_state(lc, number, "open")
    assert lc.task(issue).state == TaskState.TERMINATED
