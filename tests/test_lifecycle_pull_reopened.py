"""A task's pull request closed without a merge and then reopened (people close and reopen one
to run its CI again): the task is back as the close found it, on the issue and in memory,
and what follows counts again (a merge makes it `merged`, a Decision answers its question,
a review gets a review run, not the fix run the close stopped). A redelivered reopen
changes nothing; a terminated task stays terminated; a merged pull request cannot be
reopened. Delivered out of order (the close's first delivery failed and was retried after
the reopen's), the task still ends as its pull request is. Real RQ workers, the GitHub
sandbox, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import copy

import aiohttp
from sqlalchemy import select

from bot.lifecycle.delivery import deliver_pending
from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from github_sandbox.operations import HookEvent
from memory.models import MemoryChunk
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import (
    as_person,
    delivered_pull,
    reopen_delivered_before_its_close,
    send_again,
)
from tests.test_lifecycle_api import _assistant_messages, _chat_session
from tests.test_lifecycle_ci_fix import _rows, _stopped_at_the_bound, fail_head
from tests.test_lifecycle_review_runs import _comment, _replies
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
    # GitHub's resend with the pull request as it is now (a later `updated_at`, so no
    # replay by content): the task is not closed, nothing changes.
    (sent,) = [d for d in lc.sandbox.sandbox.hooks.sent if d.action == "reopened"][:1]
    later = copy.deepcopy(sent.payload)
    later["pull_request"]["updated_at"] = "2030-01-01T00:00:00Z"
    lc.sandbox.sandbox.hooks.enqueue([HookEvent("pull_request", later)])
    await lc.settle()
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


async def test_a_reopen_delivered_before_its_close_leaves_the_task_delivered(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    await reopen_delivered_before_its_close(lc, "pull_request", f"/pulls/{number}")
    assert (await lc.github.get_pull(lc.repo, number)).state == "open"
    assert lc.task(issue).state == TaskState.DELIVERED
    assert not [e for e in lc.events(task_id) if e.to_state == TaskState.CLOSED]
    assert "steelframe:delivered" in await lc.labels(issue)
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    assert lc.task(issue).state == TaskState.MERGED


async def test_a_terminated_tasks_pull_request_reopened_leaves_it_terminated(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await terminated_with_its_pull_open(lc)
    await _set_state(lc, number, "closed")
    await _set_state(lc, number, "open")
    assert lc.task(issue).state == TaskState.TERMINATED


async def test_a_review_after_a_reopen_gets_a_review_run_not_the_fix_run_the_close_stopped(
    make: Make,
) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    await fail_head(lc, number)
    assert lc.task(issue).state == TaskState.RUNNING  # its fix run queued
    await _set_state(lc, number, "closed")
    await lc.work()  # the fix run finds the task closed
    await _set_state(lc, number, "open")
    assert lc.task(issue).state == TaskState.DELIVERED
    comment = await _comment(lc, "maintainer", number, "write")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED
    assert [r.in_reply_to_id for r in await _replies(lc, number)] == [comment["id"]]
    assert not [e for e in lc.events(task.id) if e.to_state == TaskState.FAILED]


async def test_a_failure_after_a_reopen_on_the_head_the_close_interrupted_gets_its_fix_run(
    make: Make,
) -> None:
    """People close and reopen a pull request to run its CI again: the fix run the close
    interrupted is started when CI fails on that commit again, once however many of its
    deliveries come (the job, the check run, the suite, the workflow run; sent again)."""
    lc = await make(coding_command=command("echo"))
    issue, number = await delivered_pull(lc)
    sha = await fail_head(lc, number)
    task_id = lc.task(issue).id
    await _set_state(lc, number, "closed")
    await lc.work()  # the fix run finds the task closed
    (row,) = _rows(lc, task_id)
    assert row.state == "interrupted"
    await _set_state(lc, number, "open")
    assert lc.task(issue).state == TaskState.DELIVERED
    assert await fail_head(lc, number) == sha  # CI run again on the same commit, failing
    await send_again(lc, "workflow_job", "completed", times=2)
    await send_again(lc, "check_suite", "completed")
    task = lc.task(issue)
    assert task.state == TaskState.RUNNING and len(lc.queued_jobs()) == 1
    fix_runs = [e for e in lc.events(task_id) if e.kind == EventKind.CI_FIX_RUN]
    assert [e.data["head_sha"] for e in fix_runs] == [sha, sha]
    (row,) = _rows(lc, task_id)
    assert (row.state, row.run_number, row.job_id) == ("queued", 1, task.job_id)
    await lc.work()
    (row,) = _rows(lc, task_id)
    assert lc.task(issue).state == TaskState.DELIVERED and row.state == "pushed"
    assert row.result_sha == (await lc.github.get_pull(lc.repo, number)).head.sha


async def test_a_reopen_puts_a_task_waiting_for_a_decision_back_to_waiting(make: Make) -> None:
    """CI stopped at its bound and asked a person; they close and reopen the pull request
    to run CI again, then answer: the Decision starts the fix run it asks for."""
    lc = await make(coding_command=command("echo"), ci_fix_runs=1)
    issue, number, _ = await _stopped_at_the_bound(lc)
    question = lc.task(issue).question
    await _set_state(lc, number, "closed")
    await _set_state(lc, number, "open")
    task = lc.task(issue)
    assert (task.state, task.question) == (TaskState.WAITING_FOR_INFO, question)
    assert "steelframe:needs_human" in await lc.labels(issue)
    await lc.comment_as("maintainer", issue, f"{DECISION}\nThe test is right.", "write")
    assert lc.task(issue).state == TaskState.RUNNING and len(lc.queued_jobs()) == 1


async def test_a_reopen_tells_the_chat_session_nothing_new(make: Make) -> None:
    """The chat session the task was filed from heard it was delivered; the close and the
    reopen that puts it back as it was are no new result there."""
    lc = await make(coding_command=command("commit"))
    session = await _chat_session(lc.api)
    issue = await lc.open_issue("Make the widget blue", pickup=False)
    await lc.pickups.pickup(
        lc.repo, issue, title="Make the widget blue", origin_session=session, cause="chat"
    )
    await lc.work()
    number = lc.task(issue).pr_number
    assert number is not None
    said = [m["meta"]["state"] for m in await _assistant_messages(lc.api, session)]
    assert said == ["delivered"]
    await _set_state(lc, number, "closed")
    await _set_state(lc, number, "open")
    assert lc.task(issue).state == TaskState.DELIVERED
    assert await asyncio.to_thread(deliver_pending, lc.ctx.db, lc.task(issue).id) == []
    said = [m["meta"]["state"] for m in await _assistant_messages(lc.api, session)]
    assert said == ["delivered"]
