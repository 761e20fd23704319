"""Following the pull request to its end: merged -> `merged`, closed -> `closed` (final),
on the issue, the Board, the events stream and in memory; redeliveries change nothing
twice; a pull request Steelframe did not open, or of an archived task, is left alone. A
terminated task's pull request (left open by the terminate) merged makes the task `merged`;
closed without a merge, the task stays `terminated`. Real RQ workers, the GitHub sandbox,
SQLite and PostgreSQL."""

from __future__ import annotations

import copy

from sqlalchemy import select

from bot.contracts.events import TaskFrame
from bot.lifecycle import reconcile
from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from bot.models import Operator
from github_sandbox.operations import HookEvent
from memory.models import MemoryChunk
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull, send_again
from tests.test_lifecycle_terminate_pull import OPERATOR, terminated_with_its_pull_open


def _outcome_chunks(lc: Lifecycle, number: int) -> list[str]:
    key = f"pull-outcome:{lc.repo}#{number}"
    return lc.ctx.db.call(
        lambda s: list(
            s.scalars(
                select(MemoryChunk.text).where(MemoryChunk.key == key, MemoryChunk.live.is_(True))
            )
        )
    )


async def _task_events(lc: Lifecycle) -> list[TaskFrame]:
    operator = lc.ctx.db.call(lambda s: s.scalar(select(Operator.id).limit(1)))
    batch = await lc.api.services.events.log.read(operator, 0, wait=0.1)
    return [e.frame for e in batch.events if isinstance(e.frame, TaskFrame)]


async def test_a_merged_pull_request_makes_the_task_merged_everywhere(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    task = lc.task(issue)
    assert task.state == TaskState.MERGED
    labels = await lc.labels(issue)
    assert "steelframe:merged" in labels and "steelframe:delivered" not in labels
    progress = [c for c in await lc.comments(issue) if "steelframe-progress" in c["body"]]
    assert len(progress) == 1 and "[x] merged" in progress[0]["body"]
    assert "State: `merged`" in progress[0]["body"]
    last = lc.events(task.id)[-1]
    assert (last.kind, last.to_state) == (EventKind.TRANSITION, TaskState.MERGED)
    assert f"#{number} merged by maintainer" in last.detail
    (remembered,) = _outcome_chunks(lc, number)
    assert f"for {lc.repo}#{issue} was merged by maintainer" in remembered
    assert task.pr_url is not None and task.pr_url in remembered
    announced = [e for e in await _task_events(lc) if e.task_id == task.id]
    assert announced[-1].state == "merged" and "merged by maintainer" in announced[-1].reason
    board = (await (await lc.api.get("/api/operator/board")).json())["tasks"]
    assert [t["state"] for t in board if t["id"] == task.id] == ["merged"]
    # GitHub closes the issue the pull request says it fixes ("Fixes #N" in its body).
    fixed = await lc.github.get_issue(lc.repo, issue)
    assert fixed.state == "closed"


async def test_only_the_tasks_issue_is_closed_whatever_the_runtime_wrote(make: Make) -> None:
    """The runtime's summary goes into the pull request's body; a closing keyword in it
    ("closes #M") is written so GitHub does not act on it: merging closes the task's issue
    alone."""
    other = await (await make()).open_issue("Another issue", pickup=False)
    lc = await make(coding_command=command("say", f"Done; this also closes #{other}."))
    issue, number = await delivered_pull(lc)
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    assert (await lc.github.get_issue(lc.repo, issue)).state == "closed"
    assert (await lc.github.get_issue(lc.repo, other)).state == "open"


async def test_merged_redelivered_three_times_changes_nothing_twice(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    task_id = lc.task(issue).id
    before = len(lc.events(task_id))
    comments = len(await lc.comments(issue))
    await send_again(lc, "pull_request", "closed", times=3)
    assert lc.task(issue).state == TaskState.MERGED
    assert len(lc.events(task_id)) == before
    assert len(await lc.comments(issue)) == comments
    assert len(_outcome_chunks(lc, number)) == 1


async def test_a_pull_request_closed_without_a_merge_makes_the_task_closed(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    await as_person(lc, "maintainer", "PATCH", f"/pulls/{number}", {"state": "closed"})
    task = lc.task(issue)
    assert task.state == TaskState.CLOSED
    assert "steelframe:closed" in await lc.labels(issue)
    (remembered,) = _outcome_chunks(lc, number)
    assert "was closed without a merge by maintainer" in remembered
    # Final: picking the issue up again starts nothing.
    await lc.pickups.pickup(lc.repo, issue, title="again", cause="test")
    assert lc.task(issue).state == TaskState.CLOSED and lc.queued_jobs() == []


async def test_the_reconciler_leaves_a_merged_task_merged(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await delivered_pull(lc)
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    await lc.github.remove_label(lc.repo, issue, "steelframe:merged")
    lc.age_history(issue)  # drift, not the merge's own label update on its way
    report = await reconcile.reconcile(lc.ctx, lc.github)
    assert not report.errors and lc.task(issue).state == TaskState.MERGED
    assert "steelframe:merged" in await lc.labels(issue)  # repaired toward the final state


async def test_a_pull_request_steelframe_did_not_open_is_not_the_tasks(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await delivered_pull(lc)
    # The same branch and number, but opened by someone else (a forged or foreign event).
    opened = next(d for d in lc.sandbox.sandbox.hooks.sent if d.event == "pull_request")
    payload = copy.deepcopy(opened.payload)
    payload["action"] = "closed"
    when = "2026-01-01T00:00:00Z"
    payload["pull_request"].update(state="closed", closed_at=when, merged_at=when, merged=True)
    payload["pull_request"]["user"] = {**payload["pull_request"]["user"], "login": "outsider"}
    lc.sandbox.sandbox.hooks.enqueue([HookEvent("pull_request", payload)])
    await lc.settle()
    assert lc.task(issue).state == TaskState.DELIVERED
    assert _outcome_chunks(lc, number) == []


async def test_a_merge_of_an_archived_task_is_recorded_and_ignored(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    await lc.archive(task_id, actor="operator")
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    assert lc.task(issue).state == TaskState.DELIVERED
    ignored = [e for e in lc.events(task_id) if e.kind == EventKind.PULL_END_IGNORED]
    assert len(ignored) == 1 and "archived" in ignored[0].detail
    assert _outcome_chunks(lc, number) == []


async def test_a_terminated_tasks_pull_request_merged_makes_the_task_merged_everywhere(
    make: Make, any_db_url: str
) -> None:
    """The terminate left the pull request open (its notice said so); a maintainer merged
    it: the work landed, so the task is `merged` as after any merge, not `terminated`."""
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await terminated_with_its_pull_open(lc)
    task_id = lc.task(issue).id
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    task = lc.task(issue)
    history = [(e.kind, e.to_state, e.actor, e.detail) for e in lc.events(task_id)]
    assert task.state == TaskState.MERGED, history
    labels = await lc.labels(issue)
    assert "steelframe:merged" in labels and "steelframe:terminated" not in labels
    last = lc.events(task_id)[-1]
    assert (last.kind, last.from_state, last.to_state) == (
        EventKind.TRANSITION,
        TaskState.TERMINATED,
        TaskState.MERGED,
    )
    assert last.detail == f"pull request #{number} merged by maintainer"
    assert not [e for e in lc.events(task_id) if e.kind == EventKind.PULL_END_IGNORED]
    (remembered,) = _outcome_chunks(lc, number)
    assert f"for {lc.repo}#{issue} was merged by maintainer" in remembered
    announced = [e for e in await _task_events(lc) if e.task_id == task_id]
    assert [(e.state, e.reason) for e in announced[-2:]] == [
        ("terminated", f"terminated by {OPERATOR}"),
        ("merged", f"pull request #{number} merged by maintainer"),
    ]
    board = (await (await lc.api.get("/api/operator/board")).json())["tasks"]
    assert [t["state"] for t in board if t["id"] == task_id] == ["merged"]
    # Redelivered: already final, nothing twice.
    before = len(lc.events(task_id))
    await send_again(lc, "pull_request", "closed", times=2)
    assert lc.task(issue).state == TaskState.MERGED and len(lc.events(task_id)) == before


async def test_a_terminated_tasks_pull_request_closed_without_a_merge_leaves_it_terminated(
    make: Make,
) -> None:
    """Nothing landed, and the terminate already ended the task: it stays `terminated` (so
    its issue can still be picked up again), and its history says who closed the pull
    request."""
    lc = await make(coding_command=command("commit"))
    issue, number = await terminated_with_its_pull_open(lc)
    task_id = lc.task(issue).id
    await as_person(lc, "maintainer", "PATCH", f"/pulls/{number}", {"state": "closed"})
    assert lc.task(issue).state == TaskState.TERMINATED
    assert "steelframe:terminated" in await lc.labels(issue)
    (ignored,) = [e for e in lc.events(task_id) if e.kind == EventKind.PULL_END_IGNORED]
    assert ignored.detail == (
        f"pull request #{number} closed without a merge by maintainer; "
        "ignored: the task was terminated; it stays terminated"
    )
    assert _outcome_chunks(lc, number) == []
    await lc.pickups.pickup(lc.repo, issue, title="again", cause="test")
    assert lc.task(issue).state == TaskState.QUEUED  # picked up again, a new generation
