"""Review webhooks as GitHub may deliver them: late, out of order, or after the review they
belong to was dismissed. A reply delivered before its thread's first comment does not hide
the comment, and the late first comment asks for no second run; an older edit delivered
after a newer one leaves the newer text; a dismissed review's line comments are answered
by nobody, whichever arrives first. Real RQ workers and the GitHub sandbox."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.lifecycle.models import ReviewThread, ThreadState
from bot.lifecycle.reviews import DISMISSED
from github_sandbox.operations import HookEvent
from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Lifecycle, Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull
from tests.fakes.sandbox import exchange_dir
from tests.test_lifecycle_review_dismissed_live import dismiss_unheard


def _threads(lc: Lifecycle, task_id: int) -> list[ReviewThread]:
    return list(
        lc.ctx.db.call(
            lambda s: list(s.scalars(select(ReviewThread).where(ReviewThread.task_id == task_id)))
        )
    )


async def _answers(lc: Lifecycle, number: int) -> list[str]:
    comments = await lc.github.list_review_comments(lc.repo, number)
    return [c.body for c in comments if "steelframe-thread-answer" in c.body]


async def _line_comment(lc: Lifecycle, number: int, body: str, **more: Any) -> Any:
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    fields = {"body": body, "commit_id": head, "path": "CHANGE.md", "line": 1, **more}
    return await as_person(lc, "maintainer", "POST", f"/pulls/{number}/comments", fields)


def _send(lc: Lifecycle, event: str, payload: dict[str, Any]) -> None:
    lc.sandbox.sandbox.hooks.enqueue([HookEvent(event, payload)])


async def test_a_reply_delivered_before_its_first_comment(make: Make) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    task_id, hooks = lc.task(issue).id, lc.sandbox.sandbox.hooks
    url, secret = hooks.url, hooks.secret
    hooks.configure(None, secret)  # both deliveries fail for now
    root = await _line_comment(lc, number, "ROOT: Blue is too loud.")
    await _line_comment(lc, number, "REPLY: and the font too.", in_reply_to=root["id"])
    await lc.settle()
    first, reply = [d for d in hooks.sent if d.event == "pull_request_review_comment"]
    hooks.configure(url, secret)
    _send(lc, reply.event, reply.payload)  # the reply's retry comes first
    await lc.settle()
    (thread,) = _threads(lc, task_id)
    assert "ROOT: Blue is too loud." not in thread.text
    _send(lc, first.event, first.payload)  # then the first comment's
    await lc.settle()
    (thread,) = _threads(lc, task_id)
    assert thread.text == "ROOT: Blue is too loud."  # what the thread asks
    await lc.work()
    (thread,) = _threads(lc, task_id)
    assert thread.state == ThreadState.ADDRESSED
    assert "ROOT: Blue is too loud." in (thread.pinned or "")
    assert "REPLY: and the font too." in (thread.pinned or "")
    assert len(await _answers(lc, number)) == 1
    _send(lc, first.event, first.payload)  # GitHub sends it once more: nothing to do
    await lc.settle()
    assert lc.queued_jobs() == [] and _threads(lc, task_id)[0].state == ThreadState.ADDRESSED


async def test_an_older_edit_delivered_after_a_newer_one_leaves_the_newer_text(
    make: Make,
) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    await _line_comment(lc, number, "v1")
    (created,) = [
        d for d in lc.sandbox.sandbox.hooks.sent if d.event == "pull_request_review_comment"
    ]

    def edited(body: str, before: str, at: str) -> dict[str, Any]:
        payload = copy.deepcopy(created.payload)
        payload["action"] = "edited"
        payload["comment"].update(body=body, updated_at=at)
        payload["changes"] = {"body": {"from": before}}
        return payload

    _send(lc, "pull_request_review_comment", edited("v3, the latest", "v2", "2030-01-01T00:00:02Z"))
    await lc.settle()
    _send(lc, "pull_request_review_comment", edited("v2, older", "v1", "2030-01-01T00:00:01Z"))
    _send(lc, "pull_request_review_comment", created.payload)  # and its creation, once more
    await lc.settle()
    (thread,) = _threads(lc, lc.task(issue).id)
    assert thread.text == "v3, the latest"


async def _review_with_a_line_comment(
    lc: Lifecycle, number: int, *, body: str = "Please use a calmer blue."
) -> dict[str, Any]:
    """A maintainer's review with a comment on a line (asking for changes, or without
    text an approval); the payload of its dismissal, as GitHub sends it."""
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    review = {
        "body": body,
        "event": "REQUEST_CHANGES" if body else "APPROVE",
        "commit_id": head,
        "comments": [{"path": "CHANGE.md", "line": 1, "body": "This line."}],
    }
    await as_person(lc, "maintainer", "POST", f"/pulls/{number}/reviews", review)
    hooks = lc.sandbox.sandbox.hooks
    kinds = ("pull_request_review", "submitted")
    (submitted,) = [d for d in hooks.sent if (d.event, d.action) == kinds]
    dismissed = copy.deepcopy(submitted.payload)
    dismissed["action"] = "dismissed"
    dismissed["review"]["state"] = "dismissed"
    return dismissed


async def test_a_dismissed_reviews_line_comments_are_answered_by_nobody(make: Make) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    dismissed = await _review_with_a_line_comment(lc, number)
    _send(lc, "pull_request_review", dismissed)
    await lc.settle()
    await lc.work()
    threads = _threads(lc, lc.task(issue).id)
    assert sorted(t.kind for t in threads) == ["comment", "review"]
    assert {(t.state, t.reason) for t in threads} == {(ThreadState.DECLINED, DISMISSED)}
    assert await _answers(lc, number) == []


async def test_a_line_comment_delivered_after_its_reviews_dismissal_asks_nothing(
    make: Make,
) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    hooks = lc.sandbox.sandbox.hooks
    url, secret = hooks.url, hooks.secret
    hooks.configure(None, secret)  # the review's deliveries fail for now
    dismissed = await _review_with_a_line_comment(lc, number)
    await lc.settle()
    held = [d for d in hooks.sent if d.event.startswith("pull_request_review")]
    hooks.configure(url, secret)
    _send(lc, "pull_request_review", dismissed)  # the dismissal first, then the retries
    for delivery in held:
        _send(lc, delivery.event, delivery.payload)
    await lc.settle()
    threads = _threads(lc, lc.task(issue).id)
    assert sorted(t.kind for t in threads) == ["comment", "review"]
    assert {(t.state, t.reason) for t in threads} == {(ThreadState.DECLINED, DISMISSED)}
    assert lc.queued_jobs() == []


async def test_a_reviews_line_comment_is_not_answered_when_its_dismissal_is_lost(
    make: Make, tmp_path: Path
) -> None:
    """The dismissal's webhook never comes: the run reads the review's state from GitHub
    before it replies, and leaves the review's line comment unanswered (an approval with a
    line comment: the comment is the run's only thread of that review)."""
    started, go = exchange_dir(tmp_path) / "started", exchange_dir(tmp_path) / "go"
    lc = await make(coding_command=command("review", "fix", started, go))
    issue, number = await delivered_pull(lc)
    await _review_with_a_line_comment(lc, number, body="")
    (review,) = await lc.github.list_reviews(lc.repo, number)
    working = asyncio.ensure_future(lc.work())
    await wait_for(started.exists, within=PATIENCE_SECONDS)  # the run took the threads up
    await dismiss_unheard(lc, number, review.id)
    go.write_text("go")
    await working
    assert await _answers(lc, number) == []
    threads = _threads(lc, lc.task(issue).id)
    assert [(t.kind, t.state, t.reason) for t in threads] == [
        ("comment", ThreadState.DECLINED, DISMISSED)
    ]


async def test_a_first_comment_arriving_after_its_reviews_dismissal_and_a_reply_asks_nothing(
    make: Make,
) -> None:
    """A reply recorded the thread; the review is then dismissed; its first comment comes
    last, and with it the review the thread belongs to: the thread is declined."""
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc)
    hooks = lc.sandbox.sandbox.hooks
    url, secret = hooks.url, hooks.secret
    hooks.configure(None, secret)  # every delivery fails for now
    dismissed = await _review_with_a_line_comment(lc, number)
    (root,) = await lc.github.list_review_comments(lc.repo, number)
    await _line_comment(lc, number, "And the font.", in_reply_to=root.id)
    await lc.settle()
    first, reply = [d for d in hooks.sent if d.event == "pull_request_review_comment"]
    hooks.configure(url, secret)
    _send(lc, reply.event, reply.payload)
    await lc.settle()
    _send(lc, "pull_request_review", dismissed)
    _send(lc, first.event, first.payload)
    await lc.settle()
    comments = [t for t in _threads(lc, lc.task(issue).id) if t.kind == "comment"]
    assert [(t.state, t.reason) for t in comments] == [(ThreadState.DECLINED, DISMISSED)]
