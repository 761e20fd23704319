"""Steelframe's markers are in anyone's reach (task ids are sequential, the rest is fixed
text): a comment carrying one counts as Steelframe's only when the App wrote it. A
stranger's marked comment is never edited, never taken for the progress comment, a posted
notice, the CI summary, a thread's answer or a review's acknowledgement; the App posts
its own. Real RQ workers, the GitHub sandbox (which, unlike GitHub, lets the App edit a
person's comment), PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bot.clock import utcnow
from bot.lifecycle.models import ThreadKind, ThreadState
from bot.lifecycle.progress import add_notice, notice_marker, post_pending, progress_marker
from bot.lifecycle.reviews import ack_marker
from bot.lifecycle.thread_answers import ThreadAnswer, answer_marker, answer_threads
from github_sandbox.operations import HookEvent
from tests.fakes.coding import command
from tests.fakes.lifecycle import PICKUP, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull
from tests.test_lifecycle_ci_fix import _control, _head

STRANGER = "stranger"
CI_SUMMARY = "<!-- steelframe-ci-summary -->"


async def _by(lc: Lifecycle, number: int, login: str) -> list[dict[str, Any]]:
    return [c for c in await lc.comments(number) if c["user"]["login"] == login]


async def _app(lc: Lifecycle) -> str:
    return str((await lc.github.identity()).bot_login)


async def test_a_strangers_progress_marker_leaves_the_progress_comment_to_the_app(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue(pickup=False)
    planted = f"{progress_marker(1)}\nI am a stranger."  # the first task's id: guessable
    await lc.comment_as(STRANGER, issue, planted, None)
    await as_person(lc, "maintainer", "POST", f"/issues/{issue}/labels", {"labels": [PICKUP]})
    task = lc.task(issue)
    assert task.id == 1
    await lc.work()
    (theirs,) = await _by(lc, issue, STRANGER)
    assert theirs["body"] == planted  # left as they wrote it
    task = lc.task(issue)
    (ours,) = [c for c in await _by(lc, issue, await _app(lc)) if progress_marker(1) in c["body"]]
    assert "Steelframe" in ours["body"] and task.progress_comment_id == ours["id"]


async def test_a_strangers_notice_marker_does_not_stand_for_the_notice(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue(pickup=False)
    await as_person(lc, "maintainer", "POST", f"/issues/{issue}/labels", {"labels": [PICKUP]})
    task_id = lc.task(issue).id
    key = "question-1"
    planted = f"{notice_marker(task_id, key)}\nI am a stranger."
    await lc.comment_as(STRANGER, issue, planted, None)
    # A notice whose poster died before posting it: the reconciler's pass posts it.
    queued = utcnow() - timedelta(minutes=5)
    lc.ctx.db.call(lambda s: add_notice(s, task_id, key, "The real notice.", lambda: queued))
    await post_pending(lc.ctx.db, lc.github, grace=60)
    (theirs,) = await _by(lc, issue, STRANGER)
    assert theirs["body"] == planted
    ours = [c for c in await _by(lc, issue, await _app(lc)) if "The real notice." in c["body"]]
    assert len(ours) == 1 and notice_marker(task_id, key) in ours[0]["body"]


async def test_a_strangers_ci_summary_marker_is_left_alone(make: Make) -> None:
    lc = await make(coding_command=command("echo"), ci_fix_runs=0)
    _, number = await delivered_pull(lc)
    planted = f"{CI_SUMMARY}\nI am a stranger."
    await lc.comment_as(STRANGER, number, planted, None)
    sha = await _head(lc, number)
    await _control(lc, f"/statuses/{sha}", {"state": "failure", "context": "ci/tests"})
    (theirs,) = await _by(lc, number, STRANGER)
    assert theirs["body"] == planted
    (ours,) = [c for c in await _by(lc, number, await _app(lc)) if CI_SUMMARY in c["body"]]
    assert "`ci/tests`" in ours["body"]


async def _review_comment(lc: Lifecycle, number: int) -> dict[str, Any]:
    pull = await lc.github.get_pull(lc.repo, number)
    body = {"body": "Too loud.", "commit_id": pull.head.sha, "path": "CHANGE.md", "line": 1}
    return dict(await as_person(lc, "maintainer", "POST", f"/pulls/{number}/comments", body))


async def _commenting_review(lc: Lifecycle, number: int) -> Any:
    """A maintainer's review of the pull request with text and no verdict (GitHub's JSON)."""
    review = {"body": "Calmer.", "event": "COMMENT"}
    return await as_person(lc, "maintainer", "POST", f"/pulls/{number}/reviews", review)


async def test_a_strangers_thread_answer_marker_does_not_answer_the_thread(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    line = await _review_comment(lc, number)
    review = await _commenting_review(lc, number)
    # Their replies, marked as the App's answers would be: on the line's thread, and on the
    # pull request's conversation (where a review's answer goes).
    line_mark = answer_marker(ThreadKind.COMMENT, line["id"])
    review_mark = answer_marker(ThreadKind.REVIEW, review["id"])
    reply = {"body": f"{line_mark}\nAddressed.\n\nI am a stranger."}
    await as_person(
        lc,
        STRANGER,
        "POST",
        f"/pulls/{number}/comments/{line['id']}/replies",
        reply,
        permission=None,
    )
    await lc.comment_as(STRANGER, number, f"{review_mark}\nNot changed.\n\nI am a stranger.", None)
    answers = [
        ThreadAnswer(ThreadKind.COMMENT, line["id"], ThreadState.DECLINED, "The issue asks it."),
        ThreadAnswer(ThreadKind.REVIEW, review["id"], ThreadState.DECLINED, "It is calm."),
    ]
    assert await answer_threads(lc.ctx.db, lc.github, task_id, answers) == 2
    app = await _app(lc)
    replies = await lc.github.list_review_comments(lc.repo, number)
    ours = [r for r in replies if r.in_reply_to_id == line["id"] and r.user and r.user.login == app]
    assert [r.body for r in ours] == [f"{line_mark}\nNot changed.\n\nThe issue asks it."]
    said = [c["body"] for c in await _by(lc, number, app) if review_mark in c["body"]]
    assert said == [f"{review_mark}\nNot changed.\n\nIt is calm."]


async def test_a_strangers_review_ack_marker_leaves_the_acknowledgement_to_the_app(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    _, number = await delivered_pull(lc)
    hooks = lc.sandbox.sandbox.hooks
    url, secret = hooks.url, hooks.secret
    hooks.configure(None, secret)  # the review's delivery comes later (a retry)
    review = await _commenting_review(lc, number)
    await lc.settle()
    (held,) = [d for d in hooks.sent if d.event == "pull_request_review"]
    planted = f"{ack_marker(review['id'])}\nI am a stranger."
    await lc.comment_as(STRANGER, number, planted, None)
    hooks.configure(url, secret)
    hooks.enqueue([HookEvent(held.event, held.payload)])
    await lc.settle()
    (theirs,) = await _by(lc, number, STRANGER)
    assert theirs["body"] == planted
    ours = [c for c in await _by(lc, number, await _app(lc)) if "picked up the review" in c["body"]]
    assert len(ours) == 1 and ack_marker(review["id"]) in ours[0]["body"]
