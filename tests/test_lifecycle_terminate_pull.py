"""The operator's terminate of a live task whose pull request is already open (a fix run
queued for its failing CI) keeps the pull request open, and its event and notice name it,
as a terminate made in place of a run's step does (tests/test_lifecycle_terminate_endings.py):
both are built in one place (`bot.lifecycle.terminate.terminate_move`). Real RQ worker,
the GitHub sandbox, SQLite and PostgreSQL."""

from __future__ import annotations

from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import delivered_pull
from tests.test_lifecycle_ci_fix import fail_head

OPERATOR = "operator:alice"


async def terminated_with_its_pull_open(lc: Lifecycle) -> tuple[int, int]:
    """A delivered task whose pull request's CI failed (its fix run queued, the task
    `running`), then terminated by the operator: (issue, pull request number)."""
    issue, number = await delivered_pull(lc)
    await fail_head(lc, number)
    task = lc.task(issue)
    assert task.state == TaskState.RUNNING and lc.queued_jobs(), "its fix run is queued"
    answer = await lc.terminations.terminate(task.id, actor=OPERATOR)
    assert answer.applied and answer.detail.state == TaskState.TERMINATED
    return issue, number


async def _notices(lc: Lifecycle, issue: int) -> list[str]:
    """The terminate notices on the issue, without their markers."""
    bodies = [c["body"] for c in await lc.comments(issue) if "terminated by" in c["body"]]
    return [body.split("-->", 1)[1].strip() for body in bodies]


async def test_terminating_a_task_with_its_pull_request_open_names_it_and_keeps_it(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await terminated_with_its_pull_open(lc)
    task = lc.task(issue)
    assert task.state == TaskState.TERMINATED
    assert lc.queued_jobs() == []  # the fix run was cancelled
    (pull,) = await lc.pulls()
    assert (pull["number"], pull["state"]) == (number, "open")  # left as it is
    ended = lc.events(task.id)[-1]
    assert (ended.kind, ended.to_state, ended.actor) == (
        EventKind.TRANSITION,
        TaskState.TERMINATED,
        OPERATOR,
    )
    assert ended.data == {"pr_url": task.pr_url, "pr_number": number}
    assert ended.detail == f"terminated by {OPERATOR}"
    assert await _notices(lc, issue) == [
        f"Steelframe stopped working on this issue: terminated by {OPERATOR}. "
        f"Its pull request {task.pr_url} was already open; it is left as it is."
    ]
    assert "steelframe:terminated" in await lc.labels(issue)


async def test_terminating_a_task_without_a_pull_request_says_nothing_of_one(
    make: Make,
) -> None:
    lc = await make()
    issue = await lc.open_issue("Make the widget blue")
    task_id = lc.task(issue).id
    await lc.terminations.terminate(task_id, actor=OPERATOR)
    ended = lc.events(task_id)[-1]
    assert ended.to_state == TaskState.TERMINATED and not ended.data, ended.data
    assert await _notices(lc, issue) == [
        f"Steelframe stopped working on this issue: terminated by {OPERATOR}."
    ]
