"""A task's issue closed on GitHub while the task is live stops it: the task is terminated
as an operator's terminate would (a waiting plan or question can no longer be answered into
code, a queued job does not run); a delivered task is left for its pull request; a
redelivered `closed` changes nothing twice. Real RQ, the GitHub sandbox, SQLite and
PostgreSQL."""

from __future__ import annotations

from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull, send_again


async def test_closing_the_issue_of_a_waiting_task_terminates_it(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("question"), database_url=any_db_url)
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO
    await as_person(lc, "maintainer", "PATCH", f"/issues/{issue}", {"state": "closed"})
    await lc.settle()
    assert lc.task(issue).state == TaskState.TERMINATED
    last = lc.events(task.id)[-1]
    assert "maintainer, who closed the issue" in last.detail
    notices = [c["body"] for c in await lc.comments(issue) if "who closed the issue" in c["body"]]
    assert len(notices) == 1, notices
    # A Decision on the closed issue starts nothing.
    await lc.comment_as("maintainer", issue, f"{DECISION}\nGo ahead.", "write")
    await lc.work()
    assert lc.task(issue).state == TaskState.TERMINATED and lc.queued_jobs() == []
    # Redelivered: nothing happens twice.
    comments = len(await lc.comments(issue))
    events = len(lc.events(task.id))
    await send_again(lc, "issues", "closed", times=2)
    assert len(await lc.comments(issue)) == comments and len(lc.events(task.id)) == events


async def test_closing_the_issue_of_a_queued_task_cancels_its_run(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    assert lc.task(issue).state == TaskState.QUEUED and lc.queued_jobs()
    await as_person(lc, "maintainer", "PATCH", f"/issues/{issue}", {"state": "closed"})
    await lc.settle()
    assert lc.task(issue).state == TaskState.TERMINATED
    await lc.work()
    assert lc.task(issue).state == TaskState.TERMINATED and await lc.pulls() == []


async def test_closing_the_issue_of_a_delivered_task_leaves_its_pull_request(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue, _ = await delivered_pull(lc)
    await as_person(lc, "maintainer", "PATCH", f"/issues/{issue}", {"state": "closed"})
    await lc.settle()
    assert lc.task(issue).state == TaskState.DELIVERED
    [pull] = await lc.pulls()
    assert pull["state"] == "open"
