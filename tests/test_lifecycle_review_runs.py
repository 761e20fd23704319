"""A writer's review resumes the task: one run on the same branch, one new commit, one
reply per thread, the ledger settled; readers and bots start nothing; redeliveries make one
run; a person's push on the branch survives. Real RQ workers (in process), the GitHub
sandbox (its git over HTTP included), SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from sqlalchemy import select

from bot.events import RedisEventLog
from bot.events.log import Event
from bot.lifecycle import leases
from bot.lifecycle.leases import Holder
from bot.lifecycle.models import EventKind, ReviewThread, Task, ThreadKind, ThreadState
from bot.lifecycle.queue import LifecycleQueue
from bot.lifecycle.reconcile import run_reconcile
from bot.lifecycle.review_answers import ANSWERS_FILE
from bot.lifecycle.review_pickup import pick_up
from bot.lifecycle.states import TaskState
from bot.lifecycle.thread_answers import ThreadAnswer, answer_body, answer_marker
from bot.lifecycle.transition import Move, apply
from bot.models import Operator
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, Lifecycle, Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.pulls import as_person, delivered_pull, send_again
from tests.fakes.sandbox import exchange_dir


def _payload(event: Event) -> dict[str, Any]:
    """An event's fields as a client reads them (docs/api.md, "Events"), without the stream's
    `id` and `type`."""
    fields = msgspec.to_builtins(event.frame)
    return {key: value for key, value in fields.items() if key not in ("id", "type")}


async def _comment(
    lc: Lifecycle, login: str, number: int, permission: str | None, path: str = "CHANGE.md"
) -> Any:
    pull = await lc.github.get_pull(lc.repo, number)
    return await as_person(
        lc,
        login,
        "POST",
        f"/pulls/{number}/comments",
        {
            "body": "Blue is too loud.",
            "commit_id": pull.head.sha,
            "path": path,
            "line": 1,
        },
        permission=permission,
    )


def _git(git_path: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(git_path), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _branch_log(lc: Lifecycle, branch: str) -> list[str]:
    git_path = lc.sandbox.sandbox.world.repo(lc.repo).git_path
    return _git(git_path, "log", "--format=%H", f"refs/heads/{branch}").splitlines()


def _pickups(lc: Lifecycle, task_id: int) -> int:
    return sum(1 for e in lc.events(task_id) if e.kind == EventKind.REVIEW_PICKUP)


async def _replies(lc: Lifecycle, number: int) -> list[Any]:
    comments = await lc.github.list_review_comments(lc.repo, number)
    return [c for c in comments if c.in_reply_to_id]


async def _eyes(lc: Lifecycle, comment_id: int) -> int:
    answer = await lc.github.request("GET", lc.repo, f"/pulls/comments/{comment_id}")
    return int(answer.data["reactions"]["eyes"])


async def _review_events(lc: Lifecycle) -> list[dict[str, Any]]:
    """The `review` events on the operators' events stream."""
    log = RedisEventLog.from_url(str(lc.settings.redis_url))
    operators = lc.ctx.db.call(lambda s: [op.id for op in s.query(Operator).all()])
    found = []
    for operator in operators:
        batch = await log.read(operator, 0, wait=0.05)
        found += [_payload(e) for e in batch.events if e.type == "review"]
    await log.close()
    return found


def _thread_rows(lc: Lifecycle, task_id: int) -> list[ReviewThread]:
    return list(
        lc.ctx.db.call(
            lambda s: list(s.scalars(select(ReviewThread).where(ReviewThread.task_id == task_id)))
        )
    )


async def _threads(lc: Lifecycle, task_id: int) -> list[dict[str, Any]]:
    response = await lc.api.get(f"/api/operator/tasks/{task_id}")
    assert response.status == 200
    return list((await response.json())["review_threads"])


async def test_a_writers_comment_makes_one_run_one_commit_one_reply(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("review", "fix"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    before = _branch_log(lc, str(task.branch))
    comment = await _comment(lc, "maintainer", number, "write")
    assert await _eyes(lc, comment["id"]) == 1  # at once, before any run
    assert lc.task(issue).state == "queued"
    # GitHub sending the webhook three more times: still one job, one run.
    await send_again(lc, "pull_request_review_comment", "created", times=3)
    assert len(lc.queued_jobs()) == 1
    await lc.work()
    after = _branch_log(lc, str(task.branch))
    assert after[1:] == before  # one new commit, on top of the delivered branch
    assert "calmer blue" in (lc.branch_file("CHANGE.md", str(task.branch)) or "")
    # The same agent session, resumed; the answers file never reaches the branch.
    reviewed = lc.branch_file("REVIEWED.md", str(task.branch)) or ""
    assert f"resumed review-session-{task.id}" in reviewed
    assert lc.branch_file(ANSWERS_FILE, str(task.branch)) is None
    (reply,) = await _replies(lc, number)
    assert reply.in_reply_to_id == comment["id"]
    marker = answer_marker(ThreadKind.COMMENT, comment["id"], lc.task(issue).job_id)
    assert reply.body.startswith(marker)
    assert f"Addressed in {after[0]}." in reply.body and "Made it calmer." in reply.body
    (thread,) = await _threads(lc, task.id)
    assert (thread["state"], thread["commit"]) == ("addressed", after[0])
    assert lc.task(issue).state == "delivered" and _pickups(lc, task.id) == 1
    assert lc.queued_jobs() == []
    # The events stream announced the pickup, once per operator.
    announced = await _review_events(lc)
    assert announced and {e["threads"][0] for e in announced} == {f"comment:{comment['id']}"}
    assert {(e["task_id"], e["pr_number"]) for e in announced} == {(task.id, number)}


async def _review_with_two_comments(lc: Lifecycle, number: int) -> None:
    """A maintainer's review asking for changes: its text, and two comments on one line."""
    pull = await lc.github.get_pull(lc.repo, number)
    await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/reviews",
        {
            "body": "Please use a calmer blue.",
            "event": "REQUEST_CHANGES",
            "commit_id": pull.head.sha,
            "comments": [
                {"path": "CHANGE.md", "line": 1, "body": "This line."},
                {"path": "CHANGE.md", "line": 1, "body": "And say why."},
            ],
        },
    )


async def test_one_review_with_several_comments_is_one_run(make: Make) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    await _review_with_two_comments(lc, number)
    await lc.work()
    assert _pickups(lc, task.id) == 1
    threads = await _threads(lc, task.id)
    assert sorted(t["kind"] for t in threads) == ["comment", "comment", "review"]
    assert {t["state"] for t in threads} == {"addressed"}
    reviewed = lc.branch_file("REVIEWED.md", str(task.branch)) or ""
    assert all(f"{t['kind']}:{t['root_id']}" in reviewed for t in threads)
    assert len(await _replies(lc, number)) == 2  # one per comment thread
    review_answers = [
        c for c in await lc.comments(number) if "steelframe-thread-answer" in c["body"]
    ]
    assert len(review_answers) == 1  # the review's own text: one comment


async def test_a_review_arriving_while_a_worker_waits_is_still_one_run(make: Make) -> None:
    """As in `dev` and `steelframe worker`, a worker is already waiting when a review with a
    body and two line comments arrives, as three webhooks. The run the first one asks for starts
    after the gather window, once the others are in, and takes up every thread: one run.
    Started at once, it took the first thread alone and a follow-up run took the rest."""
    lc = await make(coding_command=command("review", "fix"), review_gather_seconds=4.0)
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    worker = lc.worker()
    waiting = asyncio.ensure_future(asyncio.to_thread(worker.work))
    try:
        await _review_with_two_comments(lc, number)

        def all_answered() -> bool:
            settled = _thread_rows(lc, task.id)
            return len(settled) == 3 and all(t.state != ThreadState.OPEN for t in settled)

        await wait_for(all_answered, within=PATIENCE_SECONDS)
        await wait_for(lambda: lc.task(issue).state == TaskState.DELIVERED, within=PATIENCE_SECONDS)
    finally:
        worker.stop()
        await waiting
    assert _pickups(lc, task.id) == 1


async def test_readers_and_bots_start_no_run(make: Make) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    before = _branch_log(lc, str(task.branch))
    await _comment(lc, "passerby", number, None)
    await _comment(lc, "lint-helper[bot]", number, "write")
    assert lc.task(issue).state == "delivered" and lc.queued_jobs() == []
    await lc.work()
    assert _branch_log(lc, str(task.branch)) == before and _pickups(lc, task.id) == 0


async def test_a_run_that_changes_nothing_pushes_nothing_and_asks_the_operator(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("review", "nothing"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    before = _branch_log(lc, str(task.branch))
    comment = await _comment(lc, "maintainer", number, "write")
    await lc.work()
    assert _branch_log(lc, str(task.branch)) == before  # no empty push
    (thread,) = await _threads(lc, task.id)
    assert thread["state"] == "needs_operator" and thread["commit"] is None
    (reply,) = await _replies(lc, number)
    assert reply.in_reply_to_id == comment["id"] and "operator" in reply.body
    assert lc.task(issue).state == "waiting_for_info"


async def test_a_question_waits_for_a_decision_then_the_thread_is_addressed(
    make: Make,
) -> None:
    lc = await make(coding_command=command("review", "ask"))
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    await _comment(lc, "maintainer", number, "write")
    await lc.work()
    (thread,) = await _threads(lc, task.id)
    assert thread["state"] == "needs_operator" and thread["reason"] == "Which blue?"
    assert lc.task(issue).state == "waiting_for_info"
    (reply,) = await _replies(lc, number)
    assert "Which blue?" in reply.body
    # The Decision resumes the task: a review run of the thread that waited for it.
    await lc.comment_as("maintainer", issue, f"{DECISION}\nThe logo's blue.", "write")
    await lc.work()
    (thread,) = await _threads(lc, task.id)
    head = _branch_log(lc, str(task.branch))[0]
    assert (thread["state"], thread["commit"]) == ("addressed", head)
    assert lc.task(issue).state == "delivered" and _pickups(lc, task.id) == 2
    assert len(await _replies(lc, number)) == 2  # the question, then the fix


async def test_an_unreadable_answers_file_gets_the_workers_own_answer(make: Make) -> None:
    lc = await make(coding_command=command("review", "garbled"))
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    await _comment(lc, "maintainer", number, "write")
    await lc.work()
    head = _branch_log(lc, str(task.branch))[0]
    (thread,) = await _threads(lc, task.id)
    assert (thread["state"], thread["commit"]) == ("addressed", head)
    (reply,) = await _replies(lc, number)
    assert f"Addressed in {head}." in reply.body


async def _push_as_person(lc: Lifecycle, branch: str, folder: Path, name: str) -> str:
    """A person clones the branch over the sandbox's git, commits `name`, pushes; the sha."""
    info = (await lc.github.request("GET", lc.repo, "")).data
    token = lc.sandbox.user_token("maintainer", "write")
    url = str(info["clone_url"]).replace("://", f"://x-access-token:{token}@", 1)
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}

    def push() -> str:
        subprocess.run(
            ["git", "clone", "-q", "--branch", branch, url, str(folder)], check=True, env=env
        )
        (folder / name).write_text("A person's own change.\n")
        _git(folder, "add", name)
        who = ["-c", "user.name=Pat", "-c", "user.email=pat@example.invalid"]
        _git(folder, *who, "commit", "-q", "-m", "A person's commit")
        subprocess.run(
            ["git", "-C", str(folder), "push", "-q", "origin", branch], check=True, env=env
        )
        return _git(folder, "rev-parse", "HEAD")

    return await asyncio.to_thread(push)


async def test_a_persons_push_on_the_branch_survives_the_review_run(
    make: Make, tmp_path: Path
) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    branch = str(task.branch)
    person = await _push_as_person(lc, branch, tmp_path / "person", "PERSON.md")
    assert _branch_log(lc, branch)[0] == person
    await _comment(lc, "maintainer", number, "write")
    await lc.work()
    log = _branch_log(lc, branch)
    assert log[1] == person  # the review's commit sits on top of the person's
    assert lc.branch_file("PERSON.md", branch) == "A person's own change.\n"
    assert "calmer blue" in (lc.branch_file("CHANGE.md", branch) or "")
    (thread,) = await _threads(lc, task.id)
    assert (thread["state"], thread["commit"]) == ("addressed", log[0])


async def test_a_push_by_a_person_during_the_run_is_never_overwritten(
    make: Make, tmp_path: Path
) -> None:
    # Where the held runtime may write (the coding sandbox hides the rest).
    started, go = exchange_dir(tmp_path) / "started", exchange_dir(tmp_path) / "go"
    lc = await make(coding_command=command("review", "fix", started, go))
    assert lc.exchange == started.parent
    issue, number = await delivered_pull(lc)
    branch = str(lc.task(issue).branch)
    await _comment(lc, "maintainer", number, "write")
    working = asyncio.ensure_future(lc.work())
    await wait_for(started.exists, within=120)
    person = await _push_as_person(lc, branch, tmp_path / "person", "PERSON.md")
    go.write_text("go")
    await working
    # The first attempt's push was refused (the branch moved); the retry started from the
    # person's commit and put the review's commit on top of it.
    log = _branch_log(lc, branch)
    assert log[1] == person and lc.branch_file("PERSON.md", branch) is not None
    (thread,) = await _threads(lc, lc.task(issue).id)
    assert (thread["state"], thread["commit"]) == ("addressed", log[0])
    assert lc.task(issue).state == "delivered"


def test_thread_rows_name_the_run_that_took_them_up() -> None:
    # A column the ledger keeps for the run's pickup (checked by the runs above too).
    assert {"picked_job", "picked_at", "pinned"} <= set(ReviewThread.__table__.columns.keys())


async def test_the_demo_runtime_answers_a_review_with_a_fix_commit_and_a_reply(
    make: Make,
) -> None:
    lc = await make(coding_agent="demo")
    issue = await lc.open_issue(body="The widget is red; it should be blue like the logo.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == "delivered" and task.pr_number is not None
    before = _branch_log(lc, str(task.branch))
    note_path = f"notes/issue-{issue}.md"
    comment = await _comment(lc, "maintainer", task.pr_number, "write", note_path)
    await lc.work()
    after = _branch_log(lc, str(task.branch))
    assert after[1:] == before
    note = lc.branch_file(note_path, str(task.branch)) or ""
    assert "## Review answered" in note and "> Blue is too loud." in note
    (reply,) = await _replies(lc, task.pr_number)
    assert reply.in_reply_to_id == comment["id"] and f"Addressed in {after[0]}." in reply.body


async def test_the_reconciler_asks_the_run_a_dead_process_did_not(make: Make) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    comment = await _comment(lc, "passerby", number, None)  # a real comment, ignored

    def recorded_then_died(session: Any) -> None:
        # What the webhook's transaction leaves when its process dies before asking.
        now = datetime.now(UTC)
        session.add(
            ReviewThread(
                task_id=task.id,
                kind="comment",
                root_id=comment["id"],
                pr_number=number,
                path="CHANGE.md",
                line=1,
                author="maintainer",
                state="open",
                text="Blue is too loud.",
                created_at=now,
                updated_at=now,
            )
        )

    lc.ctx.db.call(recorded_then_died)
    assert lc.task(issue).state == "delivered"
    quiet = {"say": lambda _line: None}
    await asyncio.to_thread(run_reconcile, lc.ctx, **quiet)
    assert lc.task(issue).state == "queued" and len(lc.queued_jobs()) == 1
    # A second pass neither delivers the queued task (its PR exists) nor asks again.
    await asyncio.to_thread(run_reconcile, lc.ctx, **quiet)
    assert lc.task(issue).state == "queued" and len(lc.queued_jobs()) == 1
    await lc.work()
    (thread,) = await _threads(lc, task.id)
    assert thread["state"] == "addressed" and thread["picked_at"] is not None
    assert lc.task(issue).state == "delivered"


@dataclass(frozen=True)
class _Delivered:
    """A delivered task whose pull request a review run will answer."""

    lc: Lifecycle
    issue: int
    number: int  # its pull request
    task: Task


async def _delivered_for_review(make: Make) -> _Delivered:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    return _Delivered(lc, issue, number, lc.task(issue))


async def _retried_after_dying_past_reply(bench: _Delivered, answer: ThreadAnswer) -> str:
    """A review run whose worker dies between a thread's reply and the ledger row's update
    (the task running under an expired lease, its job gone, the thread taken up by that run
    and its reply, with that run's marker, on GitHub), found by the reconciler and run
    again; the dead run's job."""
    lc, issue, task = bench.lc, bench.issue, bench.task
    job = str(task.job_id)
    assert leases.acquire(lc.ctx.db, task.id, Holder("elsewhere:1:dead", "elsewhere", 1), ttl=0.01)
    LifecycleQueue(lc.ctx.redis, name=lc.ctx.queue_name).rq.empty()
    lc.ctx.db.call(
        apply, task.id, Move(TaskState.RUNNING, actor="dead-worker", changes={"attempts": 1})
    )
    assert len(await pick_up(lc.ctx.db, lc.github, lc.task(issue), job=job)) == 1
    body = answer_body(answer, job)
    if answer.kind == ThreadKind.COMMENT:
        await lc.github.reply_to_review_comment(lc.repo, bench.number, answer.root_id, body)
    else:
        await lc.github.create_comment(lc.repo, bench.number, body)
    await lc.settle()
    # The reconciler sees the run dead once its lease's 10 ms are over.
    await wait_for(
        lambda: not leases.is_live(lc.ctx.db.call(leases.current, task.id), lc.ctx.clock()),
        within=PATIENCE_SECONDS,
    )
    report = await asyncio.to_thread(run_reconcile, lc.ctx, say=lambda line: None)
    assert report.recovered == [task.id], report.lines()
    await lc.work()  # the retry
    return job


async def test_a_run_retried_after_its_worker_died_past_a_reply_replies_once(
    make: Make,
) -> None:
    bench = await _delivered_for_review(make)
    lc, number = bench.lc, bench.number
    comment = await _comment(lc, "maintainer", number, "write")
    head = _branch_log(lc, str(bench.task.branch))[0]
    said = ThreadAnswer(ThreadKind.COMMENT, comment["id"], ThreadState.ADDRESSED, "Calmer.", head)
    job = await _retried_after_dying_past_reply(bench, said)
    (reply,) = await _replies(lc, number)  # the dead run's, and no second one
    assert reply.body.startswith(answer_marker(ThreadKind.COMMENT, comment["id"], job))
    # The ledger says what the reply said, and the task is delivered again.
    (thread,) = await _threads(lc, bench.task.id)
    assert (thread["state"], thread["commit"]) == ("addressed", head)
    assert lc.task(bench.issue).state == TaskState.DELIVERED


async def test_a_question_replied_before_the_worker_died_still_waits_for_a_decision(
    make: Make,
) -> None:
    bench = await _delivered_for_review(make)
    lc, number = bench.lc, bench.number
    pull = await lc.github.get_pull(lc.repo, number)
    review = await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/reviews",
        {"body": "Which blue?", "event": "COMMENT", "commit_id": pull.head.sha},
    )
    asked = ThreadAnswer(ThreadKind.REVIEW, review["id"], ThreadState.NEEDS_OPERATOR, "Dark?")
    await _retried_after_dying_past_reply(bench, asked)
    answers = [c for c in await lc.comments(number) if "steelframe-thread-answer" in c["body"]]
    assert len(answers) == 1, [c["body"] for c in answers]
    (thread,) = await _threads(lc, bench.task.id)
    assert (thread["state"], thread["reason"]) == ("needs_operator", "Dark?")
    assert lc.task(bench.issue).state == TaskState.WAITING_FOR_INFO


async def test_a_writers_reply_on_an_answered_thread_gets_the_next_runs_reply(
    make: Make,
) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    task = lc.task(issue)
    comment = await _comment(lc, "maintainer", number, "write")
    await lc.work()
    (thread,) = await _threads(lc, task.id)
    assert thread["state"] == "addressed"
    # The reviewer answers in the thread: it is open again, and a second run answers it.
    await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/comments",
        {
            "body": "Still too loud.",
            "in_reply_to": comment["id"],
            "commit_id": (await lc.github.get_pull(lc.repo, number)).head.sha,
            "path": "CHANGE.md",
        },
    )
    assert lc.task(issue).state == "queued"
    await lc.work()
    (thread,) = await _threads(lc, task.id)
    answers = [r for r in await _replies(lc, number) if "steelframe-thread-answer" in r.body]
    assert len(answers) == 2, [r.body for r in answers]  # one per run, the last one now
    assert thread["state"] == "needs_operator" and "question" in answers[-1].body
    assert _pickups(lc, task.id) == 2
