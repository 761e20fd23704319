"""Reviews on a task's pull request: a writer's comment gets `eyes` at once and its thread a
ledger row; redeliveries, readers, bots, the App itself and terminated or archived tasks
add nothing. Real RQ workers deliver the pull request; the GitHub sandbox; SQLite and
PostgreSQL."""

from __future__ import annotations

from typing import Any

from bot.lifecycle.models import ThreadKind, ThreadState
from bot.lifecycle.reviews import CUT_NOTE, MAX_REVIEW_TEXT, ack_marker, pinned_text
from bot.lifecycle.thread_answers import ThreadAnswer, answer_threads
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull, send_again


async def _comment(lc: Lifecycle, login: str, number: int, permission: str | None) -> Any:
    pull = await lc.github.get_pull(lc.repo, number)
    return await as_person(
        lc,
        login,
        "POST",
        f"/pulls/{number}/comments",
        {
            "body": "Blue is too loud.",
            "commit_id": pull.head.sha,
            "path": "CHANGE.md",
            "line": 1,
        },
        permission=permission,
    )


async def _eyes(lc: Lifecycle, comment_id: int) -> int:
    shown = await lc.github.get_review_comment(lc.repo, comment_id)
    answer = await lc.github.request("GET", lc.repo, f"/pulls/comments/{shown.id}")
    return int(answer.data["reactions"]["eyes"])


def _reaction_posts(lc: Lifecycle) -> int:
    return sum(
        1
        for ex in lc.sandbox.sandbox.traffic
        if ex.method == "POST" and ex.path.endswith("/reactions") and not ex.injected
    )


async def _detail(lc: Lifecycle, task_id: int) -> dict[str, Any]:
    response = await lc.api.get(f"/api/operator/tasks/{task_id}")
    assert response.status == 200
    return dict(await response.json())


async def test_a_writers_review_comment_gets_eyes_once_and_an_open_thread(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    assert (await _detail(lc, task_id))["ready_for_review"] is True
    comment = await _comment(lc, "maintainer", number, "write")
    assert await _eyes(lc, comment["id"]) == 1
    detail = await _detail(lc, task_id)
    (thread,) = detail["review_threads"]
    assert (thread["kind"], thread["root_id"], thread["state"]) == (
        "comment",
        comment["id"],
        "open",
    )
    assert (thread["path"], thread["line"], thread["author"]) == ("CHANGE.md", 1, "maintainer")
    assert detail["ready_for_review"] is False
    # GitHub sending the same webhook three more times: no second call, no second row.
    posts = _reaction_posts(lc)
    await send_again(lc, "pull_request_review_comment", "created", times=3)
    assert _reaction_posts(lc) == posts and await _eyes(lc, comment["id"]) == 1
    assert len((await _detail(lc, task_id))["review_threads"]) == 1


async def test_a_reply_joins_its_thread_and_the_apps_own_reply_is_not_a_review(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await delivered_pull(lc)
    comment = await _comment(lc, "maintainer", number, "write")
    posts = _reaction_posts(lc)
    await lc.github.reply_to_review_comment(lc.repo, number, comment["id"], "On it.")
    await lc.settle()
    assert _reaction_posts(lc) == posts  # the App does not acknowledge itself
    reply = await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/comments/{comment['id']}/replies",
        {"body": "Thanks"},
    )
    assert await _eyes(lc, reply["id"]) == 1
    threads = (await _detail(lc, lc.task(issue).id))["review_threads"]
    assert [t["root_id"] for t in threads] == [comment["id"]]


async def test_readers_and_bots_and_archived_tasks_get_nothing(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    posts = _reaction_posts(lc)
    reader = await _comment(lc, "passerby", number, None)
    bot = await _comment(lc, "lint-helper[bot]", number, "write")
    assert await _eyes(lc, reader["id"]) == 0 and await _eyes(lc, bot["id"]) == 0
    await lc.archive(task_id, actor="operator")
    late = await _comment(lc, "maintainer", number, "write")
    assert await _eyes(lc, late["id"]) == 0
    assert _reaction_posts(lc) == posts
    assert (await _detail(lc, task_id))["review_threads"] == []


async def test_a_review_with_text_is_acknowledged_by_one_comment_and_recorded(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    pull = await lc.github.get_pull(lc.repo, number)
    review = await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/reviews",
        {
            "body": "Please use a calmer blue.",
            "event": "REQUEST_CHANGES",
            "commit_id": pull.head.sha,
            "comments": [{"path": "CHANGE.md", "line": 1, "body": "This line."}],
        },
    )
    await send_again(lc, "pull_request_review", "submitted", times=2)
    acks = [c for c in await lc.comments(number) if ack_marker(review["id"]) in c["body"]]
    assert len(acks) == 1 and "@maintainer" in acks[0]["body"]
    threads = (await _detail(lc, lc.task(issue).id))["review_threads"]
    assert sorted((t["kind"], t["state"]) for t in threads) == [
        ("comment", "open"),
        ("review", "open"),
    ]
    comment = next(t for t in threads if t["kind"] == "comment")
    assert await _eyes(lc, comment["root_id"]) == 1


def test_review_text_over_64_kb_is_cut_with_a_note() -> None:
    assert pinned_text("short") == "short"
    cut = pinned_text("é" * MAX_REVIEW_TEXT)
    assert cut.endswith(CUT_NOTE)
    assert len(cut.removesuffix(CUT_NOTE).encode()) <= MAX_REVIEW_TEXT


async def test_answering_a_thread_replies_once_and_settles_it_in_the_ledger(
    make: Make, any_db_url: str
) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    first = await _comment(lc, "maintainer", number, "write")
    second = await _comment(lc, "maintainer", number, "write")
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    answers = [
        ThreadAnswer(ThreadKind.COMMENT, first["id"], ThreadState.ADDRESSED, "Calmer.", head),
        ThreadAnswer(ThreadKind.COMMENT, second["id"], ThreadState.DECLINED, "The issue asks it."),
    ]
    assert await answer_threads(lc.ctx.db, lc.github, task_id, answers) == 2
    await lc.settle()
    assert await answer_threads(lc.ctx.db, lc.github, task_id, answers) == 0  # settled
    replies = [c for c in await lc.github.list_review_comments(lc.repo, number) if c.in_reply_to_id]
    assert sorted((r.in_reply_to_id, r.body.splitlines()[1]) for r in replies) == sorted(
        [(first["id"], f"Addressed in {head}."), (second["id"], "Not changed.")]
    )
    detail = await _detail(lc, task_id)
    states = {
        t["root_id"]: (t["state"], t["commit"], t["reason"]) for t in detail["review_threads"]
    }
    assert states == {
        first["id"]: ("addressed", head, None),
        second["id"]: ("declined", None, "The issue asks it."),
    }
    # The comments queued a review run; with every thread settled it delivers at once.
    assert detail["ready_for_review"] is False and detail["state"] == "queued"
    await lc.work()
    assert (await _detail(lc, task_id))["ready_for_review"] is True  # the reviewer's turn
