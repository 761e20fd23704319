"""A delivered task's pull request that conflicts with its moved base: another change
merged into main touching the same file; the merge's webhook (or the reconciler's pass)
starts one update run, which merges main into the branch with the conflicts resolved by
the agent, and the pull request merges again; redeliveries change nothing; a run that
cannot resolve them asks a person with one comment. Real RQ workers, the GitHub sandbox
(its mergeability is a real test merge), SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from gidgethub.sansio import Event
from sqlalchemy.orm import Session

from bot.lifecycle.base_intake import BaseUpdates
from bot.lifecycle.base_models import BaseUpdate
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.queue import job_id
from bot.lifecycle.reconcile import run_reconcile
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import branch_with_file
from tests.fakes.lifecycle import DECISION, Lifecycle, Make, a_lease_later
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull, send_again
from webhooks.deps import WEBHOOKS
from webhooks.handlers.base_moves import on_base_pushed

MARKER = "<!-- steelframe-base-update"


def _git_path(lc: Lifecycle) -> Any:
    repo = lc.sandbox.sandbox.world.repo(lc.repo)
    assert repo is not None and repo.git_path is not None
    return repo.git_path


async def _merge_conflicting_change(lc: Lifecycle, name: str) -> None:
    """A person's pull request writing `name` otherwise, merged into main (its webhook sent
    and processed)."""
    branch_with_file(_git_path(lc), "other-change", name, "Someone else's text.\n")
    pull = await as_person(
        lc,
        "maintainer",
        "POST",
        "/pulls",
        {"title": "Other", "head": "other-change", "base": "main"},
    )
    await as_person(lc, "maintainer", "PUT", f"/pulls/{pull['number']}/merge", {})


async def _mergeable(lc: Lifecycle, number: int) -> tuple[bool | None, str]:
    """The pull request's mergeability once GitHub computed it (the first read of new tips
    starts the computation)."""
    await lc.github.merge_state(lc.repo, number)
    state = await lc.github.merge_state(lc.repo, number)
    return state.mergeable, state.mergeable_state


def _rows(lc: Lifecycle, task_id: int) -> list[BaseUpdate]:
    return list(
        lc.ctx.db.call(
            lambda s: (
                s.query(BaseUpdate)
                .filter(BaseUpdate.task_id == task_id)
                .order_by(BaseUpdate.id)
                .all()
            )
        )
    )


async def _stops(lc: Lifecycle, number: int) -> list[str]:
    return [c["body"] for c in await lc.comments(number) if MARKER in c["body"]]


def _intake(lc: Lifecycle, update_runs: int = 1) -> BaseUpdates:
    return BaseUpdates(
        db=lc.api.services.db, github=lc.github, queue=lc.queue, update_runs=update_runs
    )


async def test_a_conflicting_merge_into_main_gets_one_update_run_and_the_pull_request_merges_again(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("echo"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    await _merge_conflicting_change(lc, "PROMPT.md")  # the echo runtime's file
    task = lc.task(issue)
    assert task.state == TaskState.RUNNING and len(lc.queued_jobs()) == 1
    (row,) = _rows(lc, task.id)
    assert (row.verdict, row.state, row.run_number, row.base_ref) == ("update", "queued", 1, "main")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, task.last_error
    assert await _mergeable(lc, number) == (True, "clean")
    (row,) = _rows(lc, task.id)
    head = (await lc.github.merge_state(lc.repo, number)).head.sha
    assert (row.state, row.result_sha, row.conflicts) == ("pushed", head, ["PROMPT.md"])
    branch = task.branch or f"steelframe/issue-{issue}"
    prompt = lc.branch_file("PROMPT.md", branch)  # what the agent was told (echo)
    assert prompt is not None and "<merge-conflicts>" in prompt and '"PROMPT.md"' in prompt
    assert re.search(r"^<{7} ", prompt, re.MULTILINE) is None  # no conflict left
    assert await _stops(lc, number) == []
    # Now the person's merge of the pull request goes through.
    merged = await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    assert merged["merged"] is True


async def test_the_merge_webhook_redelivered_and_read_again_is_one_update_run(make: Make) -> None:
    lc = await make(coding_command=command("echo"))
    issue, number = await delivered_pull(lc)
    await _merge_conflicting_change(lc, "PROMPT.md")
    task = lc.task(issue)
    await send_again(lc, "pull_request", "closed", times=2)
    # Running now, so no longer among the delivered tasks a base move reads; read anyway
    # (a delivery that read the task just before the claim), the pair is claimed.
    assert await _intake(lc).on_base_moved(lc.repo, "main") == []
    again = await _intake(lc).check(task)
    assert (again.verdict, again.task_id) == ("already handled", task.id)
    assert len(lc.queued_jobs()) == 1 and len(_rows(lc, task.id)) == 1
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    await send_again(lc, "pull_request", "closed")  # after the run: the pair is settled
    assert lc.queued_jobs() == [] and len(_rows(lc, task.id)) == 1
    assert await _mergeable(lc, number) == (True, "clean")


async def test_an_update_run_that_leaves_the_conflicts_asks_a_person_with_one_comment(
    make: Make,
) -> None:
    lc = await make(coding_command=command("merge_idle"))
    issue, number = await delivered_pull(lc)
    await _merge_conflicting_change(lc, "CHANGE.md")
    before = (await lc.github.merge_state(lc.repo, number)).head.sha
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO
    assert task.question is not None and "conflict markers are left in CHANGE.md" in task.question
    assert "steelframe:needs_human" in await lc.labels(issue)
    (row,) = _rows(lc, task.id)
    assert (row.state, row.result_sha) == ("unresolved", None)
    assert (await lc.github.merge_state(lc.repo, number)).head.sha == before  # nothing pushed
    (stop,) = await _stops(lc, number)
    assert "merge conflicts with `main`" in stop and "CHANGE.md" in stop
    await send_again(lc, "pull_request", "closed", times=2)
    await _intake(lc).check(task)  # read again by hand, as the reconciler would
    assert len(await _stops(lc, number)) == 1 and lc.queued_jobs() == []
    assert await _mergeable(lc, number) == (False, "dirty")


async def test_past_the_bound_a_person_is_asked_at_once_without_a_run(make: Make) -> None:
    lc = await make(coding_command=command("echo"), base_update_runs=0)
    issue, number = await delivered_pull(lc)
    await _merge_conflicting_change(lc, "PROMPT.md")
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO and lc.queued_jobs() == []
    (stop,) = await _stops(lc, number)
    assert "STEELFRAME_BASE_UPDATE_RUNS=0" in stop
    await send_again(lc, "pull_request", "closed")
    assert len(await _stops(lc, number)) == 1


async def test_the_reconciler_finds_a_conflict_no_webhook_reported(make: Make) -> None:
    """main moved by a push the service never heard of: the first pass finds GitHub still
    computing the mergeability, the next one starts the update run."""
    lc = await make(coding_command=command("echo"))
    issue, _ = await delivered_pull(lc)
    branch_with_file(_git_path(lc), "main", "PROMPT.md", "Pushed straight to main.\n")
    first = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert first.conflicts == [] and lc.task(issue).state == TaskState.DELIVERED
    second = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    task = lc.task(issue)
    assert second.conflicts == [task.id] and task.state == TaskState.RUNNING
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED


async def test_a_push_to_the_base_is_read_as_a_base_move(make: Make) -> None:
    """The `push` handler, redelivered (the sandbox sends no push webhooks: the handler is
    called with what GitHub's push payload holds for it)."""
    lc = await make(coding_command=command("echo"))
    issue, _ = await delivered_pull(lc)
    branch_with_file(_git_path(lc), "main", "PROMPT.md", "Pushed straight to main.\n")
    ctx = lc.api.raw.app[WEBHOOKS].processor.ctx
    data = {"ref": "refs/heads/main", "deleted": False, "repository": {"full_name": lc.repo}}
    await on_base_pushed(Event(data, event="push", delivery_id="push-1"), ctx)
    assert lc.task(issue).state == TaskState.RUNNING and len(lc.queued_jobs()) == 1
    await on_base_pushed(Event(data, event="push", delivery_id="push-1-again"), ctx)
    assert len(lc.queued_jobs()) == 1 and len(_rows(lc, lc.task(issue).id)) == 1
    tag = {**data, "ref": "refs/tags/v1"}
    await on_base_pushed(Event(tag, event="push", delivery_id="push-2"), ctx)
    assert len(lc.queued_jobs()) == 1


async def test_one_merge_into_main_reads_every_delivered_pull_request_into_it(make: Make) -> None:
    lc = await make(coding_command=command("echo"))
    first, _ = await delivered_pull(lc, "Make the widget blue")
    second, _ = await delivered_pull(lc, "Make the gadget green")
    await _merge_conflicting_change(lc, "PROMPT.md")
    assert [lc.task(i).state for i in (first, second)] == [TaskState.RUNNING] * 2
    assert len(lc.queued_jobs()) == 2


async def test_a_conflicted_file_whose_name_git_quotes_is_still_checked_for_markers(
    make: Make,
) -> None:
    """git quotes a name with a non-ASCII character in its usual output ("CHANG\\303\\211.md"):
    read that way, the conflicted file was not found, taken for deleted (a resolution), and
    its conflict markers were pushed."""
    name = "CHANGÉ.md"
    lc = await make(coding_command=command("merge_idle", name))
    issue, number = await delivered_pull(lc)
    await _merge_conflicting_change(lc, name)
    before = (await lc.github.merge_state(lc.repo, number)).head.sha
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO, task.last_error
    assert task.question is not None and f"conflict markers are left in {name}" in task.question
    assert (await lc.github.merge_state(lc.repo, number)).head.sha == before  # nothing pushed
    (row,) = _rows(lc, task.id)
    assert (row.state, row.conflicts) == ("unresolved", [name])


class _Counted:
    """The App's client, counting the pull request reads a base move makes."""

    def __init__(self, github: Any) -> None:
        self.github, self.reads = github, 0

    async def merge_state(self, repo: str, number: int) -> Any:
        self.reads += 1
        return await self.github.merge_state(repo, number)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.github, name)


async def test_a_push_to_a_branch_no_delivered_pull_request_targets_reads_none_of_them(
    make: Make,
) -> None:
    """Every run's push to its own branch is a `push` too: reading each delivered task's
    pull request for each of them would spend the installation's rate limit."""
    lc = await make(coding_command=command("echo"))
    issue, _ = await delivered_pull(lc)
    counted = _Counted(lc.github)
    updates = BaseUpdates(db=lc.api.services.db, github=counted, queue=lc.queue, update_runs=1)
    branch_with_file(_git_path(lc), "feature-x", "PROMPT.md", "Elsewhere.\n")
    assert await updates.on_base_moved(lc.repo, "feature-x") == []
    assert counted.reads == 0
    branch_with_file(_git_path(lc), "main", "PROMPT.md", "Pushed straight to main.\n")
    (outcome,) = await updates.on_base_moved(lc.repo, "main")
    assert outcome.verdict == "update run" and counted.reads > 0
    assert lc.task(issue).state == TaskState.RUNNING


class _CommentsDown(_Counted):
    """The App's client while GitHub refuses to create comments."""

    async def create_comment(self, repo: str, number: int, body: str) -> Any:
        raise RuntimeError("GitHub answered 502")


async def test_a_stop_comment_github_refused_is_posted_by_the_reconciler(
    make: Make, any_db_url: str
) -> None:
    """The task waits for a person after the stop; no base move reads a task that is not
    delivered, so only the reconciler's pass can post the comment that failed."""
    lc = await make(coding_command=command("echo"), base_update_runs=0, database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    down = _CommentsDown(lc.github)
    updates = BaseUpdates(db=lc.api.services.db, github=down, queue=lc.queue, update_runs=0)
    branch_with_file(_git_path(lc), "main", "PROMPT.md", "Pushed straight to main.\n")
    await lc.github.merge_state(lc.repo, number)  # GitHub's mergeability computed
    (outcome,) = await updates.on_base_moved(lc.repo, "main")
    assert outcome.verdict == "needs human"
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO and await _stops(lc, number) == []
    await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert await _stops(lc, number) == []  # a stop this young: its comment is on its way
    for _ in range(2):
        await asyncio.to_thread(run_reconcile, a_lease_later(lc.ctx), say=lambda line: None)
    (stop,) = await _stops(lc, number)
    assert "STEELFRAME_BASE_UPDATE_RUNS=0" in stop
    (row,) = _rows(lc, lc.task(issue).id)
    assert row.comment_id is not None


async def _head(lc: Lifecycle, number: int) -> str:
    return (await lc.github.merge_state(lc.repo, number)).head.sha


def _update_prompt(lc: Lifecycle, issue: int) -> str:
    """What the Decision's update run told the agent (merge_decide leaves it in the merge)."""
    task = lc.task(issue)
    prompt = lc.branch_file("UPDATE_PROMPT.md", task.branch or f"steelframe/issue-{issue}")
    assert prompt is not None
    return prompt


@pytest.mark.parametrize("stop", ["ask", "limit"])
async def test_an_update_run_waiting_for_a_person_is_continued_by_the_decision(
    make: Make, any_db_url: str, stop: str
) -> None:
    """The update run's agent asked a question, or the run hit a budget: nothing is pushed,
    the task waits with the update run still queued (no stop: the pair is not handled yet),
    and the Decision's run is that update run again, the same run number (the bound is 1),
    with what it waited on and the Decision as guidance. It resolves and pushes."""
    lc = await make(coding_command=command("merge_decide", stop), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    await _merge_conflicting_change(lc, "CHANGE.md")
    before = await _head(lc, number)
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO, task.last_error
    waited = task.question or ""
    said = "Whose text should CHANGE.md keep?" if stop == "ask" else "budget reached"
    assert said in waited
    (row,) = _rows(lc, task.id)
    assert (row.state, row.run_number) == ("queued", 1)
    assert await _head(lc, number) == before and await _stops(lc, number) == []
    guidance = "Keep both texts, theirs first."
    await lc.comment_as("maintainer", issue, f"{DECISION}\n{guidance}", "write")
    assert lc.task(issue).state == TaskState.RUNNING and len(lc.queued_jobs()) == 1
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, task.last_error
    head = await _head(lc, number)
    (row,) = _rows(lc, task.id)
    assert (row.state, row.run_number, row.result_sha) == ("pushed", 1, head)
    assert await _mergeable(lc, number) == (True, "clean")
    prompt = _update_prompt(lc, issue)
    assert f"<operator-guidance>\n{guidance}\n</operator-guidance>" in prompt
    assert prompt.count(guidance) == 1  # pinned once, not again as the issue's Decision
    assert f"<update-question>\n{waited}\n</update-question>" in prompt
    assert await _stops(lc, number) == []


@pytest.mark.parametrize(
    ("runs", "stopped", "number_of_run"), [(1, "unresolved", 2), (0, "stopped", 1)]
)
async def test_a_decision_on_a_stopped_update_starts_one_more_update_run(
    make: Make, any_db_url: str, runs: int, stopped: str, number_of_run: int
) -> None:
    """An update run that left the conflicts (or the bound spent before any) stopped with
    one comment; the Decision turns that stop into one more update run of the same pair,
    past the bound, guided by it, and the pull request merges again."""
    lc = await make(
        coding_command=command("merge_decide", "idle"),
        database_url=any_db_url,
        base_update_runs=runs,
    )
    issue, number = await delivered_pull(lc)
    await _merge_conflicting_change(lc, "CHANGE.md")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO, task.last_error
    waited = task.question or ""
    (row,) = _rows(lc, task.id)
    assert row.state == stopped
    (stop,) = await _stops(lc, number)
    assert "publish a Decision on the issue" in stop
    guidance = "Keep both texts, theirs first."
    await lc.comment_as("maintainer", issue, f"{DECISION}\n{guidance}", "write")
    task = lc.task(issue)
    assert task.state == TaskState.RUNNING and lc.queued_jobs() == [task.job_id]
    (row,) = _rows(lc, task.id)
    wanted = ("decision", "queued", number_of_run, task.job_id)
    assert (row.verdict, row.state, row.run_number, row.job_id) == wanted
    (asked,) = [e for e in lc.events(task.id) if e.kind == EventKind.NOTE and e.data]
    assert asked.data == {"pr_number": number, "head_sha": row.head_sha, "decision": True}
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, task.last_error
    head = await _head(lc, number)
    (row,) = _rows(lc, task.id)
    assert (row.state, row.run_number, row.result_sha) == ("pushed", number_of_run, head)
    assert await _mergeable(lc, number) == (True, "clean")
    prompt = _update_prompt(lc, issue)
    assert f"<operator-guidance>\n{guidance}\n</operator-guidance>" in prompt
    assert f"<update-question>\n{waited}\n</update-question>" in prompt
    assert len(await _stops(lc, number)) == 1


async def test_an_update_run_that_pushed_before_it_crashed_is_recorded_pushed_by_its_retry(
    make: Make,
) -> None:
    """The attempt pushed its merge commit and ended before its row said so: its retry
    finds the branch at that merge (not a person's push) and records it, once."""
    lc = await make(coding_command=command("echo"))
    issue, number = await delivered_pull(lc)
    await _merge_conflicting_change(lc, "PROMPT.md")
    await lc.work()
    task = lc.task(issue)
    (row,) = _rows(lc, task.id)
    merge = await _head(lc, number)
    assert (row.state, row.result_sha) == ("pushed", merge)
    retry = job_id(task.id, task.generation, "retry")

    def crashed_after_the_push(session: Session) -> None:
        """The row and the task as the crash left them: still queued, and running."""
        updates = session.query(BaseUpdate).filter(BaseUpdate.id == row.id)
        updates.update({"state": "queued", "result_sha": None})
        tasks = session.query(Task).filter(Task.id == task.id)
        tasks.update({"state": TaskState.RUNNING, "job_id": retry})

    lc.ctx.db.call(crashed_after_the_push)
    lc.queue.enqueue(task.id, job=retry, continuation=True)
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, task.last_error
    (row,) = _rows(lc, task.id)
    assert (row.state, row.result_sha) == ("pushed", merge)
    assert await _head(lc, number) == merge and await _mergeable(lc, number) == (True, "clean")


@pytest.mark.parametrize("end", ["terminated", "merged"])
async def test_an_update_run_waiting_on_its_question_ends_with_its_task(
    make: Make, end: str
) -> None:
    """No run holds an update run that waits for a person: a terminate or a merge in its
    place, after which no Decision continues it, ends it (not left `queued`)."""
    lc = await make(coding_command=command("merge_decide", "ask"))
    issue, number = await delivered_pull(lc)
    await _merge_conflicting_change(lc, "CHANGE.md")
    await lc.work()  # the update run asks
    task_id = lc.task(issue).id
    assert [r.state for r in _rows(lc, task_id)] == ["queued"]
    if end == "terminated":
        response = await lc.api.post(f"/api/operator/tasks/{task_id}/terminate")
        assert response.status == 200, await response.text()
    else:  # a person rebased the branch on main by hand, then merged it
        branch = lc.task(issue).branch or f"steelframe/issue-{issue}"
        branch_with_file(_git_path(lc), branch, "CHANGE.md", "Both texts.\n")
        await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
        await lc.settle()
    assert lc.task(issue).state == end
    assert [r.state for r in _rows(lc, task_id)] == ["ended"]


async def test_each_decision_buys_one_update_run_and_a_second_stop_edits_the_comment(
    make: Make,
) -> None:
    """The Decision's update run leaves the conflicts too: a person is asked again, the
    pair's one comment now saying why that run stopped, and the next Decision buys the
    next run of the chain."""
    lc = await make(coding_command=command("merge_idle"))
    issue, number = await delivered_pull(lc)
    await _merge_conflicting_change(lc, "CHANGE.md")
    await lc.work()
    (stop,) = await _stops(lc, number)
    assert "update run 1 could not conclude the merge" in stop
    await lc.comment_as("maintainer", issue, f"{DECISION}\nTry again.", "write")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO, task.last_error
    assert "update run 2 could not conclude the merge" in (task.question or "")
    (stop,) = await _stops(lc, number)
    assert "update run 2 could not conclude the merge" in stop
    (row,) = _rows(lc, task.id)
    assert (row.state, row.run_number) == ("unresolved", 2) and row.comment_id is not None
    await lc.comment_as("maintainer", issue, f"{DECISION}\nOnce more.", "write")
    (row,) = _rows(lc, task.id)
    assert (row.verdict, row.state, row.run_number) == ("decision", "queued", 3)
